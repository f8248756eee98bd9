"""specsched.sim: a discrete-event model of one SGLang-style serving instance.

The scheduling decisions live in :mod:`sim.scheduler` (time-free), the overlap loop in
:mod:`sim.loop` (a sequence of device operations), and :mod:`sim.engine` executes that loop
on a SimPy clock with :mod:`sim.cost_model`. :mod:`runtime` executes the same loop on a GPU.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
