//! Reading the input of a subcommand: a file or stdin, as chunks as they arrive.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use anyhow::Context;
use bytes::{Bytes, BytesMut};

/// Bytes read at most per read call when no chunk size is given.
const READ_SIZE: usize = 64 * 1024;

/// A source of input bytes: the named file, or stdin when the path is absent or `-`.
pub fn open(path: Option<&Path>) -> anyhow::Result<Box<dyn Read>> {
    match path {
        None => Ok(Box::new(io::stdin())),
        Some(p) if p.as_os_str() == "-" => Ok(Box::new(io::stdin())),
        Some(p) => {
            let file = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            Ok(Box::new(file))
        }
    }
}

/// Calls `on_chunk` with the input split into chunks of exactly `chunk` bytes (the last may be
/// shorter), or, without a chunk size, with whatever each read returns, so that bytes from a pipe
/// are handled as soon as they arrive.
pub fn for_each_chunk(
    mut reader: impl Read,
    chunk: Option<usize>,
    mut on_chunk: impl FnMut(Bytes) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let read_size = chunk.unwrap_or(READ_SIZE).max(1);
    let mut buf = BytesMut::with_capacity(read_size.max(READ_SIZE));
    loop {
        if buf.capacity() - buf.len() < read_size.min(READ_SIZE) {
            buf.reserve(read_size.max(READ_SIZE));
        }
        let start = buf.len();
        let want = match chunk {
            Some(n) => n - start,
            None => buf.capacity() - start,
        };
        buf.resize(start + want, 0);
        let read = match reader.read(&mut buf[start..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                buf.truncate(start);
                continue;
            }
            Err(e) => return Err(e).context("cannot read input"),
        };
        buf.truncate(start + read);
        let eof = read == 0;
        let ready = match chunk {
            Some(n) => buf.len() == n || (eof && !buf.is_empty()),
            None => !buf.is_empty(),
        };
        if ready {
            on_chunk(buf.split().freeze())?;
        }
        if eof {
            return Ok(());
        }
    }
}
