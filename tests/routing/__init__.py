"""Routers: rules, semantic, hybrid, calibration and the e5 encoder."""
