#!/usr/bin/env python3
"""Validates ATIF trajectory files against Harbor's own pydantic models.

    validate_atif.py HARBOR_DIR FILE...

HARBOR_DIR is a folder holding the `harbor/models/trajectories` package unzipped from the
harbor wheel (0.26.0). The package's `__init__` files above `trajectories` are not needed: the
models are imported as `harbor.models.trajectories` from a namespace package. Prints one line
per file and a JSON summary; exits 0 when every file validates, 1 when one does not, 2 when the
models cannot be imported.
"""
import json
import sys


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, sys.argv[1])
    try:
        from harbor.models.trajectories import Trajectory  # noqa: E402
    except Exception as e:  # pragma: no cover - reported to the test
        print(f"cannot import harbor.models.trajectories from {sys.argv[1]}: {e!r}", file=sys.stderr)
        return 2
    bad = 0
    summary = {}
    for path in sys.argv[2:]:
        with open(path, "rb") as f:
            text = f.read()
        try:
            t = Trajectory.model_validate_json(text)
        except Exception as e:
            bad += 1
            print(f"INVALID {path}: {e}")
            continue
        steps = []
        for s in t.steps:
            steps.append({
                "source": s.source,
                "tool_calls": [
                    {"id": c.tool_call_id, "name": c.function_name, "arguments": c.arguments}
                    for c in (s.tool_calls or [])
                ],
                "observations": [
                    {"source_call_id": r.source_call_id, "content": r.content}
                    for r in (s.observation.results if s.observation else [])
                ],
                "prompt_tokens": s.metrics.prompt_tokens if s.metrics else None,
                "completion_tokens": s.metrics.completion_tokens if s.metrics else None,
                "cached_tokens": s.metrics.cached_tokens if s.metrics else None,
            })
        fm = t.final_metrics
        summary[path] = {
            "schema_version": t.schema_version,
            "agent": t.agent.name,
            "steps": steps,
            "total_prompt_tokens": fm.total_prompt_tokens if fm else None,
            "total_completion_tokens": fm.total_completion_tokens if fm else None,
            "total_cached_tokens": fm.total_cached_tokens if fm else None,
            "total_steps": fm.total_steps if fm else None,
        }
        print(f"valid {path}")
    print("SUMMARY " + json.dumps(summary))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
