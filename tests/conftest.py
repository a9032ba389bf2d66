"""Test-wide settings: reproducible property tests, and no model hub."""

import os

from hypothesis import settings

# The BERT tests load pretrained weights from an installed package; nothing may reach a hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

# The same examples on every run (CI included), and no example database left in the tree.
settings.register_profile("book", derandomize=True, database=None, print_blob=True)
settings.load_profile("book")
