#!/usr/bin/env python3
"""Holdout check for deploy: service-config/config.json is fixed as its README documents.

Both bugs must be fixed: the timeout key is misspelt (`request_timeout_secs`, so the worker
falls back to 5 s) and retries are off (`retry.max_attempts` = 0). Nothing else may change.
"""

import json
import pathlib
import sys


def fail(msg: str) -> None:
    print(f"FAIL: {msg}")
    sys.exit(1)


def config_path() -> pathlib.Path:
    for base in (pathlib.Path.cwd(), pathlib.Path(__file__).resolve().parent):
        p = base / "service-config" / "config.json"
        if p.is_file():
            return p
    fail("service-config/config.json not found")
    raise AssertionError


def whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def main() -> None:
    try:
        cfg = json.loads(config_path().read_text())
    except ValueError as e:
        fail(f"config.json is not valid JSON: {e}")
    if not isinstance(cfg, dict):
        fail("config.json is not an object")
    for key, want in [("service", "ledger-sync"), ("upstream", "https://ledger.internal.example/v2"), ("batch_size", 500)]:
        if cfg.get(key) != want:
            fail(f"{key} changed: {cfg.get(key)!r}, expected {want!r}")
    timeout = cfg.get("request_timeout_seconds")
    if not whole(timeout) or not 30 <= timeout <= 600:
        fail(f"request_timeout_seconds must be a whole number of seconds, at least 30; it is {timeout!r}")
    retry = cfg.get("retry")
    if not isinstance(retry, dict):
        fail("retry is missing")
    attempts = retry.get("max_attempts")
    if not whole(attempts) or not 3 <= attempts <= 10:
        fail(f"retry.max_attempts must be 3 to 10; it is {attempts!r}")
    if retry.get("backoff_seconds") != 30:
        fail(f"retry.backoff_seconds changed: {retry.get('backoff_seconds')!r}")
    print(f"OK: request_timeout_seconds = {timeout}, retry.max_attempts = {attempts}")


if __name__ == "__main__":
    main()
