"""tickgate's own plugins. They are registered through the ``tickgate``
entry-point group (``tickgate.builtin.plugin``), exactly like a third party's."""
