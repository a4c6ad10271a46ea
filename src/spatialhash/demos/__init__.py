"""Simulations that show the spatial hash at work: colliding particles and cloth.

They need the ``demo`` extra (Pillow for animations, pygame for the interactive window):
``pip install "spatialhash[demo]"``.
"""
