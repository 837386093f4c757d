"""Optional integrations with other libraries; each module needs its own extra dependency.

- :mod:`trainbus.contrib.keras`: train ``tf_keras`` models with trainbus trainers
  (``pip install "trainbus[keras]"``).
"""
