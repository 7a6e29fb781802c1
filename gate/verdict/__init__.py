"""How a run is judged, with no database: the bars of a mapping, a finished run held against
them, the statistics, early stop's rule, and how an update ends."""
