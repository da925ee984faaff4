"""Constants of the standard (Python floats) and ``newaxis``.

>>> import forge_array as xp
>>> xp.newaxis is None
True
"""

import math

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
newaxis = None
