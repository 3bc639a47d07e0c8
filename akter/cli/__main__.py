"""``python -m akter.cli``: the ``akter`` command, as ``python -m akter`` runs it."""

from akter.cli import main

if __name__ == "__main__":
    main(prog_name="akter")
