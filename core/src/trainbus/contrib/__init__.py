"""Optional integrations with other libraries; each module needs its own extra dependency.

- :mod:`trainbus.contrib.keras`: train ``tf_keras`` models with trainbus trainers
  (``pip install tf-keras``, or the extra ``pip install 'trainbus[keras]'``; from a trainbus
  checkout: ``tools/build_wheels.sh``, then ``pip install --find-links dist 'trainbus[keras]'``).
"""
