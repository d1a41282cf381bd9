"""The built-in ncu recipes (YAML). Installed as the package profctl.builtin_recipes so a wheel ships them."""
