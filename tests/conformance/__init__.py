"""Conformance: loaderkit run in lockstep with torch and torchdata (DESIGN.md section 7)."""
