"""Simulations that show the spatial hash at work: colliding particles and cloth.

They need the ``demo`` extra (Pillow for animations, tqdm for progress bars):
``pip install "spatialhash[demo]"``; the particle demo's interactive window needs the
``window`` extra (pygame) besides.
"""
