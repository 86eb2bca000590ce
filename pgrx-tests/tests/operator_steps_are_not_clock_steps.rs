//! An operator's step is not a fault of the time source (design §3.1, docs/monitoring.md): on
//! 229c10d `snowflake_raise_floor(clock_timestamp() + '900 ms')` followed by an ID counted a
//! backward step of the wall clock (`backward_steps` 1 → 2, `largest_backward_step_ms` 846.8;
//! 4,947 for 5 s), so `SnowflakeWallClockSteppedBack` ("fix the time source") fired after the
//! documented cut-over step. The lag a raised floor makes is known lag: no step is counted, the
//! wall clock's lag behind the cluster clock still shows it, and IDs stay above the floor. The
//! steps have counters of their own: `floor_raises` and `floor_accepts`.

use snowflake_id_cluster_tests::Cluster;

#[test]
fn a_raised_floor_is_no_backward_step_of_the_wall_clock() {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute("CREATE EXTENSION snowflake_id; SELECT snowflake_nextval();")
        .unwrap();
    let steps = |client: &mut snowflake_id_cluster_tests::Client| -> (i64, f64, f64) {
        let row = client
            .query_one(
                "SELECT backward_steps, largest_backward_step_ms, wall_clock_behind_ms
                   FROM snowflake_stats()",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    let floor_steps = |client: &mut snowflake_id_cluster_tests::Client| -> (i64, i64) {
        let row = client
            .query_one(
                "SELECT floor_raises, floor_accepts FROM snowflake_stats()",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(floor_steps(&mut client), (0, 0));
    let (before, largest_before, _) = steps(&mut client);
    for (raises, ahead) in [(1, "900 ms"), (2, "5 s")] {
        let above: bool = client
            .query_one(
                &format!(
                    "WITH target AS (SELECT clock_timestamp() + interval '{ahead}' AS until),
                          raised AS (SELECT until, snowflake_raise_floor(until) FROM target)
                     SELECT snowflake_nextval() >= snowflake_min_id(until) FROM raised"
                ),
                &[],
            )
            .unwrap()
            .get(0);
        assert!(
            above,
            "an ID after raising the floor {ahead} ahead is in a tick that ends before it"
        );
        // A second ID from another session reads the clock again.
        cluster
            .connect()
            .query_one("SELECT snowflake_nextval()", &[])
            .unwrap();
        let (after, largest, behind) = steps(&mut client);
        println!("raised {ahead} ahead: backward_steps {after}, largest {largest} ms, wall behind {behind} ms");
        assert_eq!(
            after, before,
            "raising the floor {ahead} ahead counted a backward step"
        );
        assert_eq!(largest, largest_before);
        assert!(
            behind > 0.0,
            "the wall clock's lag behind the raised floor does not show"
        );
        assert_eq!(floor_steps(&mut client), (raises, 0));
    }
    // A raise refused by its bound is no step.
    assert!(client
        .query_one(
            "SELECT snowflake_raise_floor(clock_timestamp() + interval '1 day')",
            &[]
        )
        .is_err());
    client
        .query_one("SELECT snowflake_accept_floor()", &[])
        .unwrap();
    assert_eq!(floor_steps(&mut client), (2, 1));
    let (after, _, _) = steps(&mut client);
    assert_eq!(after, before, "accepting the floor counted a backward step");
}
