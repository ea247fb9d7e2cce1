#!/usr/bin/env python3
"""Per-trial overhead of proctor with a no-op scripted agent on a large fixture.

Generates a 10,000-file / ~40 MB fixture, runs N trials of an agent whose only step is `true`
with overlay isolation and with copy isolation, in the same invocation, and prints the median
per-trial overhead of each: the trial's total time minus the agent's own run time (so: setup,
namespaces, full stop, capture, checks (none here) and scoring), plus the wall time per trial of
the whole run. Figures are medians; nothing here asserts a time.

Usage: bench/trial_overhead.py [--trials N] [--files N] [--jobs N]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORK = ROOT / "target" / "bench"


def make_suite(files: int) -> pathlib.Path:
    suite = WORK / f"suite-{files}"
    marker = suite / ".generated"
    if marker.exists():
        return suite
    shutil.rmtree(suite, ignore_errors=True)
    fixture = suite / "fixture"
    block = os.urandom(4096)
    for i in range(files):
        d = fixture / f"d{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.bin").write_bytes(block[: 4096 - (i % 7)])
    (suite / "agents" / "noop").mkdir(parents=True)
    (suite / "agents" / "noop" / "t.toml").write_text('answer = "done"\n\n[[steps]]\nrun = "true"\n')
    (suite / "suite.toml").write_text(
        'schema_version = 1\nid = "bench"\n\n[[variants]]\nid = "noop"\nagent = "script"\n'
        'script = "agents/noop"\n\n[[tasks]]\nid = "t"\nprompt = "Do nothing."\n\n'
        '[tasks.success]\nall = [{ files_unchanged = true }]\n'
    )
    marker.write_text("")
    return suite


def run(proctor: pathlib.Path, suite: pathlib.Path, isolation: str, trials: int, jobs: int):
    store = WORK / f"store-{isolation}"
    shutil.rmtree(store, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run(
        [str(proctor), "run", str(suite), "--store", str(store), "--trials", str(trials),
         "--jobs", str(jobs), "--isolation", isolation],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    overheads, totals = [], []
    for trial in (next((store / "runs").iterdir()) / "trials").iterdir():
        rec = json.loads((trial / "trial.json").read_text())["record"]
        total = rec["timings_ms"]["total"]
        agent = rec["end_state"]["agent"]["wall_seconds"] * 1000
        totals.append(total)
        overheads.append(total - agent)
    shutil.rmtree(store, ignore_errors=True)
    return wall, statistics.median(overheads), statistics.median(totals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-p", "proctor"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proctor = ROOT / "target" / "release" / "proctor"
    WORK.mkdir(parents=True, exist_ok=True)
    suite = make_suite(a.files)
    size = sum(f.stat().st_size for f in (suite / "fixture").rglob("*") if f.is_file())
    print(f"fixture: {a.files} files, {size / 1e6:.1f} MB; {a.trials} no-op trials, --jobs {a.jobs}")
    print(f"{'isolation':<10} {'median overhead/trial':>22} {'median trial total':>19} {'run wall/trial':>15}")
    results = {}
    for iso in ("overlay", "copy"):
        wall, overhead, total = run(proctor, suite, iso, a.trials, a.jobs)
        results[iso] = overhead
        print(f"{iso:<10} {overhead:>19.2f} ms {total:>16.2f} ms {wall / a.trials * 1000:>12.2f} ms")
    print(f"copy / overlay overhead ratio: {results['copy'] / results['overlay']:.1f}x")


if __name__ == "__main__":
    sys.exit(main())
