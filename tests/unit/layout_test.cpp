#include <catch2/catch.hpp>

#include <fast/layout.hpp>

using namespace fast;

TEST_CASE("packed layout is the exclusive prefix sum of rows and of columns") {
    traffic_matrix m(3, 3);
    m << 1, 2, 3, 0, 5, 0, 7, 8, 9;
    const alltoallv_layout l = make_packed_layout(m);
    CHECK(l.send_displ(0, 2) == 3);
    CHECK(l.send_displ(2, 1) == 7);
    CHECK(l.send_size == std::vector<std::int64_t>{6, 5, 24});
    // Rank 1 receives 2 from rank 0, 5 from rank 1, 8 from rank 2, in source order.
    CHECK(l.recv_displ(0, 1) == 0);
    CHECK(l.recv_displ(1, 1) == 2);
    CHECK(l.recv_displ(2, 1) == 7);
    CHECK(l.recv_size == std::vector<std::int64_t>{8, 15, 12});
}
