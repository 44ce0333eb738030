// Grid routing: ranks placed on a GridRoute (row-major positions), a record
// travels along its origin's row to the rank in its destination's column,
// which passes it down the column (a short last row goes column first).
// At most two hops and about 2 sqrt(P) buffers per rank.
#include <utility>

#include "tessera/comm/routing.hpp"

namespace tessera::comm {

namespace {
class GridRouting final : public Routing {
 public:
  GridRouting(GridLayout layout, int rank) : layout_(std::move(layout)), me_(at(rank)) {}
  bool multi_hop() const noexcept override { return true; }

  Hop first_hop(int dest) const override {
    const GridRoute& g = layout_.grid;
    const int gd = at(dest);
    const bool same_row = g.row(gd) == g.row(me_), same_column = g.column(gd) == g.column(me_);
    const int hop = layout_.rank_at[static_cast<std::size_t>(g.next_hop(ranks(), me_, gd))];
    // Same column: the record is final at dest. Otherwise it goes as a
    // forward record (dest itself delivers the ones of its own row, so one
    // buffer to a row neighbour carries both).
    return {hop, !(same_column && !same_row)};
  }

  int forwards_to(int dest) const override {
    const GridRoute& g = layout_.grid;
    const int gd = at(dest);
    // Records for the ranks of its column arrive here to go down it.
    if (g.column(gd) == g.column(me_) && gd != me_) return dest;
    // Column-first intermediate of the short last row: forwards along its row.
    const int last_row_length = ranks() - (g.rows - 1) * g.columns;
    if (g.row(gd) == g.row(me_) && g.row(me_) < g.rows - 1 && g.column(me_) < last_row_length &&
        g.column(gd) >= last_row_length)
      return dest;
    return -1;
  }

 private:
  int at(int rank) const { return layout_.position[static_cast<std::size_t>(rank)]; }
  int ranks() const { return static_cast<int>(layout_.position.size()); }

  GridLayout layout_;
  int me_;
};
}  // namespace

GridLayout square_grid(int size) {
  GridLayout l;
  l.grid = GridRoute::of(size);
  for (int r = 0; r < size; ++r) l.position.push_back(r), l.rank_at.push_back(r);
  return l;
}

std::unique_ptr<Routing> make_grid_routing(GridLayout layout, int rank) {
  return std::make_unique<GridRouting>(std::move(layout), rank);
}

}  // namespace tessera::comm
