"""A plugin module that exists but lacks the objects its entry points name."""

SOMETHING_ELSE = 1
