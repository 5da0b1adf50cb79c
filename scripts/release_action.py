"""Point action.yml at the prebuilt image of a release: ``runs.image: docker://IMAGE:VERSION``.

On ``main`` the action builds its image from the Dockerfile (``image: Dockerfile``: the self-test runs the code of the
commit). A release commit instead names the image the release workflow pushed, so users' jobs pull it instead of
rebuilding ~100 pinned packages on every run. Only the ``image:`` line changes; the rest of the file is kept byte
for byte. Run by .github/workflows/release.yml; see README "Releasing".

Usage: python scripts/release_action.py v1.2.3 [--image ghcr.io/rag-gate/rag-gate] [--file action.yml]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

VERSION = re.compile(r"v\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?")
IMAGE_LINE = re.compile(r'^(\s+image:\s*)"?Dockerfile"?\s*$', re.M)


def release_action(text: str, version: str, image: str) -> str:
    """``text`` (action.yml) with ``image: Dockerfile`` replaced by ``image: "docker://IMAGE:VERSION"``.

    Raises:
        ValueError: ``version`` is not ``vMAJOR.MINOR.PATCH[-pre]``, ``image`` is not a registry path, or the file
            has no ``image: Dockerfile`` line (exactly one).
    """
    if not VERSION.fullmatch(version):
        raise ValueError(f"version must look like v1.2.3, got {version!r}")
    if not re.fullmatch(r"[a-z0-9.-]+(?::\d+)?(?:/[a-z0-9._-]+)+", image):
        raise ValueError(f"image must be a registry path such as ghcr.io/owner/name, got {image!r}")
    if len(IMAGE_LINE.findall(text)) != 1:
        raise ValueError("action.yml must have exactly one `image: Dockerfile` line")
    return IMAGE_LINE.sub(lambda m: f'{m.group(1)}"docker://{image}:{version}"', text)


def main(argv: list[str] | None = None) -> int:
    """Rewrite the action file in place; exit 2 on bad arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version")
    parser.add_argument("--image", default="ghcr.io/rag-gate/rag-gate")
    parser.add_argument("--file", type=Path, default=Path("action.yml"))
    args = parser.parse_args(argv)
    try:
        args.file.write_text(release_action(args.file.read_text(encoding="utf-8"), args.version, args.image))
    except (OSError, ValueError) as exc:
        print(f"release_action: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
