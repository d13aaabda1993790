"""API schemas shared by the services (pydantic models; the wire format of their local APIs)."""
