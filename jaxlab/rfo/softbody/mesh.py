"""Tetrahedral meshes from voxels, and the soft quadruped's body.

``voxel_mesh`` splits each unit cube of a voxel set into the six tetrahedra of its Kuhn
(Freudenthal) triangulation: one tet per ordering of the axes, along the monotone path
000 -> 111. Every cube face is then cut along the same diagonal from both sides, so the
mesh is conforming (neighbouring tets share whole faces); each tet has volume h^3 / 6.

``quadruped``: a box torso on four box legs (``QuadrupedMesh``); per leg two muscle
groups, the leg's front half and back half (tets whose centroid lies ahead of / behind
the leg's centre line in x; Kuhn tets centred on it stay passive), with vertical fibres:
contracting one half bends the leg forward or back. 8 groups = 8 actions.
"""

import itertools
from typing import NamedTuple

import numpy as np

__all__ = ["voxel_mesh", "QuadrupedMesh", "quadruped"]

_KUHN = tuple(itertools.permutations(range(3)))


def _cell(name: str, cell) -> tuple[int, int, int]:
    """``cell`` as three ints (ValueError naming ``name`` for anything else)."""
    c = np.asarray(cell)
    if c.shape != (3,) or c.dtype.kind not in "iuf" or not np.all(c == np.round(c)):
        raise ValueError(f"`{name}`: expected three integers (x, y, z), got {cell!r}.")
    return tuple(int(v) for v in c)


def voxel_mesh(cells, h: float) -> tuple[np.ndarray, np.ndarray]:
    """(nodes [N, 3], tets [T, 4], positively oriented) of the union of unit cubes
    ``cells`` (an iterable of integer (i, j, k)) scaled by ``h`` [m].

    Raises:
      ValueError: no cells, a cell that is not three integers, or ``h`` <= 0.
    """
    cells = sorted({_cell("cells", cell) for cell in cells})
    if not cells:
        raise ValueError("`cells` must hold at least one voxel.")
    if not h > 0:
        raise ValueError(f"`h` must be > 0, got {h}.")
    index: dict[tuple[int, int, int], int] = {}

    def node(p):
        return index.setdefault(p, len(index))

    tets = []
    for c in cells:
        for perm in _KUHN:
            p = list(c)
            path = [node(tuple(p))]
            for axis in perm:
                p[axis] += 1
                path.append(node(tuple(p)))
            tets.append(path)
    nodes = np.zeros((len(index), 3))
    for p, i in index.items():
        nodes[i] = p
    nodes *= h
    tets = np.asarray(tets, np.int32)
    x = nodes[tets]
    vol = np.einsum("ti,ti->t", x[:, 1] - x[:, 0],
                    np.cross(x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]))
    flip = vol < 0
    tets[flip, 2], tets[flip, 3] = tets[flip, 3].copy(), tets[flip, 2].copy()
    return nodes, tets


class QuadrupedMesh(NamedTuple):
    """The soft quadruped's mesh.

    Attributes:
      nodes: [N, 3] rest positions; the feet touch z = 0, the torso is centred on x = y = 0
        and the front is +x.
      tets: [T, 4].
      groups: [T] muscle group (2 * leg + {0: front half, 1: back half}) or -1 (passive);
        legs 0..3 = front-left, front-right, back-left, back-right (left = +y).
      fibres: [T, 3] fibre directions (vertical).
      leg_nodes: [4, K] node indices of each leg (its cells below the torso).
      front_nodes, back_nodes: [M] torso nodes of the front / back face (x extremes).
    """

    nodes: np.ndarray
    tets: np.ndarray
    groups: np.ndarray
    fibres: np.ndarray
    leg_nodes: np.ndarray
    front_nodes: np.ndarray
    back_nodes: np.ndarray


def quadruped(torso_cells=(6, 3, 2), leg_cells=(1, 1, 2), h: float = 0.05) -> QuadrupedMesh:
    """A box torso of ``torso_cells`` (nx, ny, nz) voxels on four legs of ``leg_cells``
    (lx, ly, lz) voxels under its corners, voxel size ``h`` [m].

    The default (6, 3, 2) torso on (1, 1, 2) legs with h = 5 cm is 44 voxels, 264 tets and
    116 nodes: a 30 x 15 x 10 cm torso on 10 cm legs.

    Raises:
      ValueError: legs that do not fit under the torso (2 lx > nx or 2 ly > ny), a cell
        count that is not three integers, or a non-positive size.
    """
    nx, ny, nz = _cell("torso_cells", torso_cells)
    lx, ly, lz = _cell("leg_cells", leg_cells)
    if min(nx, ny, nz, lx, ly, lz) < 1:
        raise ValueError(f"cell counts must be >= 1, got torso_cells={torso_cells}, "
                         f"leg_cells={leg_cells}.")
    if 2 * lx > nx or 2 * ly > ny:
        raise ValueError(f"`leg_cells`={leg_cells}: four legs must fit under the torso "
                         f"{torso_cells} (2 lx <= nx and 2 ly <= ny).")
    torso = [(i, j, lz + k) for i in range(nx) for j in range(ny) for k in range(nz)]
    # legs: 0 front-left (+x, +y), 1 front-right (+x, -y), 2 back-left, 3 back-right
    origins = [(nx - lx, ny - ly), (nx - lx, 0), (0, ny - ly), (0, 0)]
    legs = [[(x0 + i, y0 + j, k) for i in range(lx) for j in range(ly) for k in range(lz)]
            for x0, y0 in origins]
    nodes, tets = voxel_mesh(torso + [c for leg in legs for c in leg], h)
    centroid = nodes[tets].mean(axis=1) / h
    groups = np.full(tets.shape[0], -1, np.int32)
    tol = 1e-9
    leg_nodes = []
    for leg, (x0, y0) in enumerate(origins):
        in_leg = ((centroid[:, 2] < lz) & (centroid[:, 0] > x0) & (centroid[:, 0] < x0 + lx)
                  & (centroid[:, 1] > y0) & (centroid[:, 1] < y0 + ly))
        cx = x0 + 0.5 * lx
        groups[in_leg & (centroid[:, 0] > cx + tol)] = 2 * leg
        groups[in_leg & (centroid[:, 0] < cx - tol)] = 2 * leg + 1
        p = nodes / h
        sel = ((p[:, 2] < lz - tol) & (p[:, 0] >= x0 - tol) & (p[:, 0] <= x0 + lx + tol)
               & (p[:, 1] >= y0 - tol) & (p[:, 1] <= y0 + ly + tol))
        leg_nodes.append(np.nonzero(sel)[0])
    p = nodes / h
    in_torso = p[:, 2] >= lz - tol
    front = np.nonzero(in_torso & (np.abs(p[:, 0] - nx) < tol))[0]
    back = np.nonzero(in_torso & (np.abs(p[:, 0]) < tol))[0]
    nodes = nodes - np.array([nx * h / 2, ny * h / 2, 0.0])
    fibres = np.tile([0.0, 0.0, 1.0], (tets.shape[0], 1))
    return QuadrupedMesh(nodes, tets, groups, fibres, np.stack(leg_nodes).astype(np.int32),
                         front.astype(np.int32), back.astype(np.int32))
