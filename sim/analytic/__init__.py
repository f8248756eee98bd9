"""Analytic profiles: a roofline model of a forward from a model shape and a GPU datasheet
(``specsched profile --analytic``). One module per concept: :mod:`.gpus` (GPU table),
:mod:`.models` (model shapes, config.json), :mod:`.roofline` (the time of a forward),
:mod:`.writer` (the profile), :mod:`.cli` (the command)."""
