"""Turn action.yml into the container's argument list and environment, the way the Actions runner does.

The runner gives a Docker action its inputs twice: as ``INPUT_<NAME>`` variables (name upper-cased, spaces to
``_``) and through ``runs.args`` / ``runs.env``, with ``${{ inputs.x }}`` replaced by the input's value (the
default when the workflow does not set it). This helper does the same, for ``.ci/container-test.sh``.

    python tests/container/action_run.py action.yml args  KEY=VALUE...   # one argument per line
    python tests/container/action_run.py action.yml env   KEY=VALUE...   # NAME=value lines for --env-file
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

EXPR = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")


def parse(action: str) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """(input defaults, runs.args, runs.env) of an action.yml."""
    data = yaml.safe_load(action)
    defaults = {name: str(spec.get("default", "")) for name, spec in data.get("inputs", {}).items()}
    runs = data["runs"]
    return defaults, [str(a) for a in runs.get("args", [])], {k: str(v) for k, v in runs.get("env", {}).items()}


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
