"""The plugin host: the hook specifications (:mod:`.hookspecs`), the registry that loads every
entry point and checks what it registers (:mod:`.registry`, :mod:`.checks`), and the policy file that
chooses plugins by name and validates their options (:mod:`.policy`)."""
