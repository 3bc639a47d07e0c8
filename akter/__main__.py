"""``python -m akter``: the ``akter`` command (``akter.cli``) where the console script is not on
``PATH`` — a virtual environment not activated, or a container's bare interpreter."""

from akter.cli import main

if __name__ == "__main__":
    main(prog_name="akter")
