"""``python -m gate`` runs the CLI."""

from gate.cli import main

if __name__ == "__main__":
    main()
