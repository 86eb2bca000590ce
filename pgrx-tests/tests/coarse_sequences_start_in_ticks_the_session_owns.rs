//! A connection's first ID of another coarse sequence waits for no tick when only this
//! backend's own claim is in the way (design §4; issue 64): on 229c10d the first ID of each
//! further one-second sequence in one connection waited for that sequence's next tick, as its
//! generator started after the worker id's floor, which this backend's earlier IDs had raised:
//! seven such sequences took 5.8 s. The interval a backend owns holds other sequences' IDs
//! only, so a new sequence (a new ID space) may use it. A second issuer of one sequence in a
//! backend (the sequence dropped and created again under its name) still starts after the floor.

use std::collections::HashSet;

use snowflake_id_cluster_tests::Cluster;

const SEQUENCES: usize = 7;

#[test]
fn first_ids_of_seven_one_second_sequences_share_the_tick_the_connection_owns() {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    for n in 1..=SEQUENCES {
        client
            .batch_execute(&format!(
                "SELECT snowflake_create_sequence('slow{n}', time_unit => interval '1 s',
                                                  time_bits => 35,
                                                  epoch => '2026-01-01 00:00:00+00')"
            ))
            .unwrap();
    }
    // The first ID of each, one statement each, in one connection: the tick (in seconds since
    // the epoch) each landed in.
    let mut ticks = Vec::new();
    let mut ids = HashSet::new();
    for n in 1..=SEQUENCES {
        let row = client
            .query_one(
                &format!(
                    "WITH made AS (SELECT snowflake_nextval('slow{n}') AS id)
                     SELECT id, extract(epoch FROM (snowflake_decode(id, 'slow{n}')).ts)::int8
                       FROM made"
                ),
                &[],
            )
            .unwrap();
        let (id, tick): (i64, i64) = (row.get(0), row.get(1));
        ids.insert((n, id));
        ticks.push(tick);
    }
    println!("first IDs' seconds: {ticks:?}");
    let spread = ticks.iter().max().unwrap() - ticks.iter().min().unwrap();
    // One boundary of a second may fall between the statements; waiting for a tick per
    // sequence spreads them over six.
    assert!(
        spread <= 1,
        "the first IDs of {SEQUENCES} one-second sequences spread over {spread} s: {ticks:?}"
    );

    // More IDs of each, interleaved, in the same ticks: none twice within a sequence, and each
    // sequence's IDs increasing.
    for n in 1..=SEQUENCES {
        let made: Vec<i64> = client
            .query(
                &format!("SELECT snowflake_nextval('slow{n}') FROM generate_series(1, 200)"),
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert!(made.windows(2).all(|pair| pair[0] < pair[1]));
        for id in made {
            assert!(ids.insert((n, id)), "slow{n} issued {id} twice");
        }
    }

    // Dropped and created again under its name: a second issuer of that name in this backend
    // starts after the floor, past the ticks its first issuer used.
    let last_tick: i64 = client
        .query_one(
            "SELECT max(extract(epoch FROM (snowflake_decode(id, 'slow1')).ts))::int8
               FROM (SELECT snowflake_nextval('slow1') AS id) AS made",
            &[],
        )
        .unwrap()
        .get(0);
    client
        .batch_execute(
            "SELECT snowflake_drop_sequence('slow1');
             SELECT snowflake_create_sequence('slow1', time_unit => interval '1 s',
                                              time_bits => 35,
                                              epoch => '2026-01-01 00:00:00+00');",
        )
        .unwrap();
    let again: i64 = client
        .query_one(
            "SELECT extract(epoch FROM (snowflake_decode(snowflake_nextval('slow1'), 'slow1')).ts)::int8",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(
        again > last_tick,
        "slow1 created again issued in second {again}, its first issuer's last was {last_tick}"
    );
}
