#!/usr/bin/env bash
# Installs the agent CLIs proctor's adapters drive, at pinned versions, into a cache folder.
#
#   agents/install.sh [NAME...]      NAME: claude-code codex copilot gemini opencode aider
#                                          claude-agent-acp codex-acp (default: all)
#
# Folder: $PROCTOR_AGENTS_DIR, default ~/.cache/proctor/agents. Each CLI goes into its own
# versioned folder (npm packages with `npm install --prefix`, aider in a Python venv), and
# $PROCTOR_AGENTS_DIR/bin/ gets one symlink per executable: claude, codex, copilot, gemini,
# opencode, aider, and the ACP adapters of Claude Code and Codex (claude-agent-acp, codex-acp:
# agents speaking the Agent Client Protocol, for `agent = "acp"`). proctor looks there first,
# then on PATH.
#
# Idempotent: a CLI whose versioned folder holds a completed stamp is not touched again, so a
# second run costs nothing. Copilot's self-unpacking package is unpacked once, into
# copilot-VERSION/xdg-cache/, which the adapter links into each trial's private cache. Only the npm registry and PyPI are used (no vendor downloads).
# Exit status: 0 when every requested CLI is installed; 1 otherwise (each failure is named).
set -uo pipefail

DIR="${PROCTOR_AGENTS_DIR:-${HOME}/.cache/proctor/agents}"
BIN="$DIR/bin"

# name|kind|package|version|executables (space separated; exe=path inside the install)
PINS=(
  "claude-code|npm|@anthropic-ai/claude-code|2.1.328|claude"
  "codex|npm|@openai/codex|0.169.0|codex"
  "copilot|npm|@github/copilot|1.0.102|copilot"
  "gemini|npm|@google/gemini-cli|0.61.0|gemini"
  "opencode|npm|opencode-ai|1.18.33|opencode"
  "aider|pypi|aider-chat|0.86.2|aider"
  "claude-agent-acp|npm|@agentclientprotocol/claude-agent-acp|0.101.0|claude-agent-acp"
  "codex-acp|npm|@agentclientprotocol/codex-acp|2.6.0|codex-acp"
)

log() { printf 'agents/install.sh: %s\n' "$*" >&2; }

install_npm() { # folder package version
  local dest="$1" pkg="$2" ver="$3"
  command -v npm >/dev/null || { log "npm is not installed"; return 1; }
  mkdir -p "$dest"
  npm install --prefix "$dest" --no-audit --no-fund --loglevel=error \
    --include=optional "${pkg}@${ver}" >&2
}

install_pypi() { # folder package version
  local dest="$1" pkg="$2" ver="$3" py
  py="$(command -v python3.11 || command -v python3 || true)"
  [ -n "$py" ] || { log "python3 is not installed"; return 1; }
  "$py" -m venv "$dest/venv" >&2 || return 1
  "$dest/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "${pkg}==${ver}" >&2
}

want() { # name
  [ "${#SELECTED[@]}" -eq 0 ] && return 0
  local s
  for s in "${SELECTED[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}

SELECTED=("$@")
for s in "${SELECTED[@]}"; do
  found=0
  for p in "${PINS[@]}"; do [ "${p%%|*}" = "$s" ] && found=1; done
  [ "$found" = 1 ] || { log "unknown agent '$s' (known: claude-code codex copilot gemini opencode aider claude-agent-acp codex-acp)"; exit 2; }
done

mkdir -p "$BIN"
failed=()
for p in "${PINS[@]}"; do
  IFS='|' read -r name kind pkg ver exes <<<"$p"
  want "$name" || continue
  dest="$DIR/$name-$ver"
  stamp="$dest/.proctor-installed"
  if [ ! -f "$stamp" ]; then
    log "installing $name ($pkg $ver) into $dest"
    rm -rf "$dest"
    if [ "$kind" = npm ]; then install_npm "$dest" "$pkg" "$ver"; else install_pypi "$dest" "$pkg" "$ver"; fi
    rc=$?
    if [ $rc -ne 0 ]; then
      log "FAILED: $name ($pkg $ver), exit $rc"
      failed+=("$name")
      continue
    fi
    printf '%s %s\n' "$pkg" "$ver" >"$stamp"
  fi
  if [ "$name" = copilot ] && [ -z "$(find "$dest/xdg-cache" -name .extraction-complete 2>/dev/null | head -1)" ]; then
    # Copilot unpacks ~235 MB into $XDG_CACHE_HOME/copilot/pkg on its first run. Do it once
    # here; the adapter links each trial's private cache to this copy instead.
    log "unpacking copilot's package into $dest/xdg-cache"
    mkdir -p "$dest/xdg-cache" "$dest/preflight-home"
    XDG_CACHE_HOME="$dest/xdg-cache" HOME="$dest/preflight-home" \
      "$dest/node_modules/.bin/copilot" --version >/dev/null 2>&1 || log "copilot --version failed while unpacking"
    rm -rf "$dest/preflight-home" "$dest/xdg-cache/Microsoft"
  fi
  for exe in $exes; do
    if [ "$kind" = npm ]; then target="$dest/node_modules/.bin/$exe"; else target="$dest/venv/bin/$exe"; fi
    if [ ! -e "$target" ]; then
      log "FAILED: $name: $target is missing after install"
      failed+=("$name")
      continue
    fi
    ln -sfn "$target" "$BIN/$exe"
  done
  log "ok: $name $ver -> $BIN"
done

if [ "${#failed[@]}" -gt 0 ]; then
  log "not installed: ${failed[*]}"
  exit 1
fi
