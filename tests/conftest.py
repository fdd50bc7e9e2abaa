"""Test set-up: kswap is imported first so TensorFlow's CPU allocator is BFC."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import kswap  # noqa: E402,F401
