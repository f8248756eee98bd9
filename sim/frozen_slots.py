"""Building a frozen, slotted dataclass without a C call per field.

A frozen dataclass's ``__setattr__`` raises, so its generated ``__init__`` sets each field with
``object.__setattr__`` (and the slots' descriptors' ``__set__`` cost the same): a C call per
field, about half the constructor of the simulator's most built objects (two ``BatchPlan`` a
Poisson request, one ``RequestSpec`` a request; docs/performance.md, twenty-fourth round). An
``__init__`` that first turns the object into :func:`writable_twin` of its class, stores its
fields as plain attributes, and turns it back, pays one call in all; the object is frozen once
built (assignment raises).
"""

from __future__ import annotations

become = object.__setattr__
"""Sets ``__class__`` past the frozen class's ``__setattr__``: ``become(obj, "__class__", twin)``."""


def writable_twin(frozen: type) -> type:
    """A class with ``frozen``'s ``__slots__`` on the same base and no ``__setattr__`` of its
    own: the two share one layout, so an object may change from one to the other (CPython's
    ``__class__`` assignment checks exactly that).

    Raises:
        AttributeError: ``frozen`` declares no ``__slots__``.
    """
    return type(f"_{frozen.__name__}Fields", (), {"__slots__": frozen.__slots__, "__module__": frozen.__module__,
                                                   "__doc__": f"{frozen.__name__}'s slots, writable: what one is "
                                                              "while its __init__ writes its fields."})
