"""Streamlit layer: widgets, Settings <-> URL, cached calls, layout. No tensor math here."""
