"""Turn action.yml into the container's argument list and environment, the way the Actions runner does.

The runner gives a Docker action its inputs twice: as ``INPUT_<NAME>`` variables (name upper-cased, spaces to
``_``) and through ``runs.args`` / ``runs.env``, with ``${{ inputs.x }}`` replaced by the input's value (the
default when the workflow does not set it). This helper does the same with the standard library only, so
``.ci/container-test.sh`` can run it before any package is installed.

    python tests/container/action_run.py action.yml args  KEY=VALUE...   # one argument per line
    python tests/container/action_run.py action.yml env   KEY=VALUE...   # NAME=value lines for --env-file
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

EXPR = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def parse(action: str) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """(input defaults, runs.args, runs.env) of a simple block-style action.yml."""
    defaults: dict[str, str] = {}
    args: list[str] = []
    env: dict[str, str] = {}
    section = sub = current = None
    for raw in action.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip())
        line = raw.strip()
        if indent == 0:
            section, sub = line.rstrip(":"), None
        elif section == "inputs" and indent == 2:
            current = line.rstrip(":")
            defaults[current] = ""
        elif section == "inputs" and indent == 4 and line.startswith("default:"):
            defaults[current] = _unquote(line.split(":", 1)[1])
        elif section == "runs" and indent == 2:
            sub = line.split(":", 1)[0]
        elif section == "runs" and sub == "args" and line.startswith("- "):
            args.append(_unquote(line[2:]))
        elif section == "runs" and sub == "env" and indent == 4:
            key, value = line.split(":", 1)
            env[key.strip()] = _unquote(value)
    return defaults, args, env


def main() -> None:
    action, mode, *pairs = sys.argv[1:]
    defaults, args, env = parse(Path(action).read_text(encoding="utf-8"))
    given = dict(pair.split("=", 1) for pair in pairs)
    unknown = set(given) - set(defaults)
    if unknown:
        sys.exit(f"unknown inputs: {sorted(unknown)}")
    values = defaults | given

    def expand(text: str) -> str:
        return EXPR.sub(lambda m: values[m.group(1)], text)

    if mode == "args":
        print("\n".join(expand(a) for a in args))
    else:
        lines = [f"INPUT_{name.upper().replace(' ', '_')}={value}" for name, value in values.items()]
        lines += [f"{key}={expand(value)}" for key, value in env.items()]
        print("\n".join(lines))


if __name__ == "__main__":
    main()
