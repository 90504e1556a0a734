"""``python -m loaderkit``: the ``loaderkit`` command."""

from loaderkit.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    main()
