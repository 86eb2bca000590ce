//! Fresh data directories without an initdb each: initdb runs once per installation into a
//! template that every test process of the run shares, and each new cluster gets a copy of it
//! with a system identifier of its own. initdb costs about 0.8 s of CPU, a copy on the memory
//! file system 0.07 s, and a run of the suite makes over a hundred fresh clusters per major on
//! two cores.
//!
//! A copy is what initdb would have written but for the system identifier, which initdb makes
//! from the time and its pid; the copy gets a new one made the same way, in `pg_control` (whose
//! CRC is recomputed) and in the header of each WAL segment, where the server checks it. The
//! extension tells clusters apart by it (a floor page another cluster's WAL wrote), so no two
//! fresh clusters may share one.

use std::collections::hash_map::DefaultHasher;
use std::fs::{File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::host::{chown_to_server_user, copy_dir, NEXT_DIRECTORY};
use crate::Cluster;

/// initdb's arguments but `--pgdata`, the same for every fresh cluster.
const INITDB_ARGUMENTS: [&str; 5] = [
    "--auth=trust",
    "--username=postgres",
    "--encoding=UTF8",
    // Every major alike (PostgreSQL 18's initdb turns checksums on by default), so pg_upgrade
    // from 15 to 18 finds them equal.
    "--data-checksums",
    "--no-sync",
];

/// PostgreSQL's CRC of `pg_control` (`COMP_CRC32C`): CRC-32C, also named CRC-32/ISCSI.
const CRC32C: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// Where a WAL segment's long page header keeps the system identifier (`xlp_sysid`, after the
/// 24-byte standard header).
const WAL_SYSTEM_IDENTIFIER_AT: u64 = 24;

/// Writes `cluster`'s data directory as initdb (with [`INITDB_ARGUMENTS`], on the cluster's
/// installation) would: a copy of this installation's template, made first if no test made it
/// yet, with a new system identifier.
pub(crate) fn fresh_data_directory(cluster: &Cluster) {
    let template = template_for(cluster);
    copy_dir(&template.join("data"), &cluster.data);
    give_new_system_identifier(&cluster.data);
}

/// Runs initdb with [`INITDB_ARGUMENTS`] into `data` on `cluster`'s installation, with its
/// server environment.
pub(crate) fn initdb(cluster: &Cluster, data: &Path) {
    cluster.server_command("initdb", |command| {
        command.arg("--pgdata").arg(data).args(INITDB_ARGUMENTS);
    });
}

/// The template of `cluster`'s installation, made by this call if it does not exist yet. It is
/// named after the installation's bin directory and its `postgres` binary (size, change time),
/// so a rebuilt PostgreSQL gets a new one; it is made under a name of this process's and renamed
/// into place whole, so a test never copies half a template, and when several tests make one at
/// once, the first rename wins and the others delete theirs.
fn template_for(cluster: &Cluster) -> PathBuf {
    let template = std::env::temp_dir().join(format!(
        "snowflake-initdb-template-{:016x}",
        installation_fingerprint(&cluster.bin)
    ));
    if template.is_dir() {
        return template;
    }
    let number = NEXT_DIRECTORY.fetch_add(1, Ordering::Relaxed);
    let making = template.with_extension(format!("{}-{number}", std::process::id()));
    std::fs::create_dir_all(&making).expect("create an initdb template directory");
    chown_to_server_user(&making);
    initdb(cluster, &making.join("data"));
    if std::fs::rename(&making, &template).is_err() {
        // Another test's template got there first (renaming onto a directory that is not empty
        // fails); it is as good as this one.
        std::fs::remove_dir_all(&making).expect("remove an initdb template made twice");
        assert!(
            template.is_dir(),
            "no initdb template at {}",
            template.display()
        );
    }
    template
}

fn installation_fingerprint(bin: &Path) -> u64 {
    let postgres = bin.join("postgres");
    let metadata = std::fs::metadata(&postgres)
        .unwrap_or_else(|error| panic!("{}: {error}", postgres.display()));
    let mut hasher = DefaultHasher::new();
    bin.hash(&mut hasher);
    metadata.len().hash(&mut hasher);
    metadata.modified().ok().hash(&mut hasher);
    INITDB_ARGUMENTS.hash(&mut hasher);
    hasher.finish()
}

/// Gives the data directory `data` (a copy of a template, never started) a system identifier
/// of its own, made as initdb makes one: seconds, microseconds and the low bits of the pid,
/// here mixed with this process's directory count so two copies made in one microsecond differ.
fn give_new_system_identifier(data: &Path) {
    let control_file = data.join("global").join("pg_control");
    let mut control = std::fs::read(&control_file)
        .unwrap_or_else(|error| panic!("{}: {error}", control_file.display()));
    // The CRC covers the control data up to itself and follows it; its offset depends on the
    // major, so it is found as the first one that matches.
    let crc_at = (8..control.len().saturating_sub(4))
        .step_by(4)
        .find(|&at| CRC32C.checksum(&control[..at]).to_ne_bytes() == control[at..at + 4])
        .unwrap_or_else(|| panic!("{}: no CRC found", control_file.display()));
    let old: [u8; 8] = control[..8].try_into().expect("8 bytes");
    let new = new_system_identifier().to_ne_bytes();
    assert_ne!(old, new, "the new system identifier is the template's");
    control[..8].copy_from_slice(&new);
    let crc = CRC32C.checksum(&control[..crc_at]).to_ne_bytes();
    control[crc_at..crc_at + 4].copy_from_slice(&crc);
    std::fs::write(&control_file, &control)
        .unwrap_or_else(|error| panic!("{}: {error}", control_file.display()));

    let wal = data.join("pg_wal");
    let segments = std::fs::read_dir(&wal)
        .unwrap_or_else(|error| panic!("{}: {error}", wal.display()))
        .map(|entry| entry.expect("read pg_wal").path())
        .filter(|path| is_wal_segment(path));
    let mut patched = 0;
    for segment in segments {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&segment)
            .unwrap_or_else(|error| panic!("{}: {error}", segment.display()));
        assert_eq!(
            read_at(&mut file, WAL_SYSTEM_IDENTIFIER_AT),
            old,
            "{}: the first page's header does not hold pg_control's system identifier",
            segment.display()
        );
        file.seek(SeekFrom::Start(WAL_SYSTEM_IDENTIFIER_AT))
            .and_then(|_| file.write_all(&new))
            .unwrap_or_else(|error| panic!("{}: {error}", segment.display()));
        patched += 1;
    }
    assert!(patched > 0, "{}: no WAL segment", wal.display());
}

fn read_at(file: &mut File, offset: u64) -> [u8; 8] {
    let mut bytes = [0; 8];
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_exact(&mut bytes))
        .expect("read a WAL segment's header");
    bytes
}

/// A WAL segment's name: 24 hexadecimal digits (timeline, log, segment).
fn is_wal_segment(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.len() == 24 && name.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn new_system_identifier() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    let low_bits =
        std::process::id() as u64 ^ NEXT_DIRECTORY.fetch_add(1, Ordering::Relaxed) as u64;
    (now.as_secs() << 32) | (u64::from(now.subsec_micros()) << 12) | (low_bits & 0xFFF)
}
