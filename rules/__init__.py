"""The fixed Datalog rules of polang (``*.dl``), shipped inside the wheel as ``polang.rules``."""
