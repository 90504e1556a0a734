"""The build layer: the only place that turns a plan into torch objects."""
