"""``python -m loaderkit``: the ``loaderkit`` command."""

from loaderkit.cli import main

if __name__ == "__main__":
    main()
