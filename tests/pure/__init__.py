"""Pure tests (no torch needed): a package, so their module names may repeat those in built/."""
