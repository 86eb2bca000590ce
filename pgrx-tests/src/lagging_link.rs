//! A TCP link on 127.0.0.1 that delivers what its target sends a fixed time late: put between a
//! primary and its streaming standby, the standby lags by that much, as over a slow network.
//! Cutting it drops what is still in flight, as a failed primary's unsent WAL is lost. Holding
//! it keeps back everything its target sends from then on, so that a test arranges "the failure
//! comes before the standby has this record" instead of racing the delay with a burst.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::{wait_until, Cluster};

pub struct LaggingLink {
    port: u16,
    cut: Arc<AtomicBool>,
    /// Set by [`LaggingLink::hold`]: what the target sends after it is never delivered.
    held: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl LaggingLink {
    /// Listens on a free port of 127.0.0.1 and forwards each connection to `target_port` there;
    /// what the target sends back arrives `delay` after it was sent.
    pub fn start(target_port: u16, delay: Duration) -> LaggingLink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the lagging link");
        listener
            .set_nonblocking(true)
            .expect("make the listener non-blocking");
        let port = listener.local_addr().expect("the link's address").port();
        let cut = Arc::new(AtomicBool::new(false));
        let held = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let acceptor = {
            let (cut, held, streams) = (cut.clone(), held.clone(), streams.clone());
            thread::spawn(move || {
                while !cut.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)) else {
                                continue;
                            };
                            client
                                .set_nonblocking(false)
                                .expect("blocking client socket");
                            let copy = |stream: &TcpStream| stream.try_clone().expect("clone");
                            streams
                                .lock()
                                .unwrap()
                                .extend([copy(&client), copy(&server)]);
                            let not_held = Arc::new(AtomicBool::new(false));
                            pump(
                                copy(&client),
                                copy(&server),
                                Duration::ZERO,
                                &cut,
                                &not_held,
                            );
                            pump(server, client, delay, &cut, &held);
                        }
                        Err(error) if error.kind() == ErrorKind::WouldBlock => {
                            thread::sleep(Duration::from_millis(5));
                        }
                        Err(_) => break,
                    }
                }
            })
        };
        LaggingLink {
            port,
            cut,
            held,
            streams,
            acceptor: Some(acceptor),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Puts a link delaying WAL by `lag` between `primary` (listening on 127.0.0.1) and its
    /// streaming `standby`: points the standby's `primary_conninfo` at it, waits until the
    /// standby streams through it and has caught up with the primary.
    pub fn between(primary: &Cluster, standby: &Cluster, lag: Duration) -> LaggingLink {
        let link = LaggingLink::start(primary.port(), lag);
        let mut client = standby.connect();
        // Two statements: ALTER SYSTEM cannot run inside the implicit transaction of a batch.
        client
            .batch_execute(&format!(
                "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port={} user=postgres'",
                link.port()
            ))
            .unwrap();
        client.batch_execute("SELECT pg_reload_conf()").unwrap();
        let through_link = wait_until(Duration::from_secs(60), || {
            client
                .query_opt(
                    "SELECT 1 FROM pg_stat_wal_receiver
                     WHERE status = 'streaming' AND sender_port = $1",
                    &[&i32::from(link.port())],
                )
                .unwrap()
                .is_some()
        });
        assert!(
            through_link,
            "the standby does not stream through the link\n{}",
            standby.log_tail()
        );
        primary.wait_for_standby(standby, Duration::from_secs(60));
        link
    }

    /// From now on nothing the target sends reaches the other side (what was sent before still
    /// arrives, `delay` after it was sent); the connections stay open, so the standby neither
    /// notices nor reconnects. What is held back is dropped at the cut, as a failed primary's
    /// unsent WAL is lost.
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    /// Drops everything in flight, closes every connection and accepts no new one.
    pub fn cut(&mut self) {
        self.cut.store(true, Ordering::Relaxed);
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

impl Drop for LaggingLink {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read, until either side closes or the
/// link is cut (what is queued then is dropped). A chunk read once `held` is set is never
/// written, nor is anything after it (a stream's bytes arrive in order or not at all).
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    delay: Duration,
    cut: &Arc<AtomicBool>,
    held: &Arc<AtomicBool>,
) {
    let (cut, held) = (cut.clone(), held.clone());
    let (sender, receiver) = mpsc::channel::<(Instant, bool, Vec<u8>)>();
    thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(read @ 1..) = from.read(&mut buffer) {
            let read_while_held = held.load(Ordering::SeqCst);
            if sender
                .send((
                    Instant::now() + delay,
                    read_while_held,
                    buffer[..read].to_vec(),
                ))
                .is_err()
            {
                break;
            }
        }
    });
    thread::spawn(move || {
        let mut holding = false;
        for (due, read_while_held, bytes) in receiver {
            holding |= read_while_held;
            if holding {
                continue;
            }
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            if cut.load(Ordering::Relaxed) || to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}
