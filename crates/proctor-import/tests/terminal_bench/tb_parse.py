"""Terminal-Bench's own verdict on a test run's output: `python3 tb_parse.py PARSER FILE`.

Runs the parser of that name from Terminal-Bench's package (`terminal_bench/parsers`, found on
PYTHONPATH) over the file's text, then decides as `Harness._parse_results` and
`Harness._is_resolved` do: a parser that raises resolves nothing; otherwise the task is
resolved when every test the parser found passed. Prints `resolved` or `unresolved`.
"""

import sys

from terminal_bench.parsers.base_parser import UnitTestStatus
from terminal_bench.parsers.parser_factory import ParserFactory, ParserName


def main() -> None:
    name, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8", newline="") as f:  # the text as it is, \r included
        content = f.read()
    parser = ParserFactory.get_parser(ParserName(name))
    try:
        results = parser.parse(content)
    except Exception:  # Harness._parse_results: any error is a parse error
        results = None
    resolved = results is not None and all(
        r == UnitTestStatus.PASSED for r in results.values()
    )
    print("resolved" if resolved else "unresolved")


if __name__ == "__main__":
    main()
