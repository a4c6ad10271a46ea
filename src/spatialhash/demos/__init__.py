"""Simulations that show the spatial hash at work: colliding particles and cloth.

They need the ``demo`` extra (Pillow for animations, tqdm for progress bars):
``pip install "spatialhash[demo]"``; the particle demo's interactive window needs the
``window`` extra (pygame) besides, and its run on a Warp device (``--device``) the ``gpu``
extra (warp-lang).
"""
