"""Exact geometry: ``planar`` (cells, Voronoi cells, clipping, cones and erosion in the plane) and
``polytope`` (hulls in any dimension)."""
from . import planar, polytope

__all__ = ["planar", "polytope"]
