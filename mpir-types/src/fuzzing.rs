//! Fuzz harnesses for every decoder, shared by the cargo-fuzz targets in `fuzz/` and by the
//! bounded no-panic run in this crate's tests. Each takes arbitrary bytes, derives a data model
//! and layout from the first ones, decodes the rest, and must return without panicking whatever
//! the input. Errors are the expected outcome for most inputs and are discarded.

use crate::layout::{LayoutSource, TypeLayout};
use crate::model::DataModel;
use crate::mpir::{self, ProcDescLayout};
use crate::mqd::{self, CommunicatorLayout, OpClass, PendingOperationLayout};
use crate::view::View;

/// Draws values from the front of the fuzzer's input.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, _| (acc << 8) | u64::from(self.u8()))
    }
    /// A value that is small most of the time, and anything some of the time.
    fn size(&mut self) -> u64 {
        match self.u8() % 4 {
            0 => self.u64(),
            _ => u64::from(self.u8()),
        }
    }
    fn model(&mut self) -> DataModel {
        let presets = DataModel::PRESETS;
        presets
            .get(usize::from(self.u8()) % presets.len())
            .map_or(DataModel::LP64, |p| p.1)
    }
    fn type_layout(&mut self, name: &str, members: &[&str]) -> TypeLayout {
        let mut t = TypeLayout::new(name, self.size(), LayoutSource::Given);
        for m in members {
            // Sometimes leave a member out; sometimes give no size.
            match self.u8() % 8 {
                0 => continue,
                1 => t.members.push(crate::layout::MemberLayout {
                    name: (*m).to_string(),
                    offset: self.size(),
                    byte_size: None,
                }),
                _ => t = t.with_member(*m, self.size(), self.size()),
            }
        }
        t
    }
    fn rest(self) -> &'a [u8] {
        self.0
    }
}

/// The proctable decoder and resolution, with an ABI or arbitrary given layout.
pub fn proctable(data: &[u8]) {
    let mut input = Input(data);
    let model = input.model();
    let layout = if input.u8() % 2 == 0 {
        ProcDescLayout::abi(&model)
    } else {
        let ty = input.type_layout("MPIR_PROCDESC", &["host_name", "executable_name", "pid"]);
        match ProcDescLayout::from_type(&ty, &model) {
            Ok(l) => l,
            Err(_) => return,
        }
    };
    let raw_size = input.u64() as i64;
    let address = input.u64();
    let bytes = input.rest();
    let Ok(count) = mpir::proctable_len(raw_size, mpir::DEFAULT_MAX_ENTRIES) else {
        return;
    };
    if let Ok(entries) = mpir::decode_proctable(&model, &layout, address, bytes, count) {
        // Pretend every string is the table bytes themselves, some unreadable.
        let addresses = mpir::string_addresses(&entries);
        let view = View::new(model, address, bytes);
        let strings: Vec<_> = addresses
            .iter()
            .map(|&a| {
                view.cstr(a.wrapping_sub(address), mpir::DEFAULT_MAX_STRING, "name")
                    .map_err(|e| e.to_string())
            })
            .collect();
        // Also with fewer strings than addresses: missing ones are problems, not panics.
        let short = strings.get(..strings.len() / 2).unwrap_or_default();
        let _ = mpir::resolve(&entries, &addresses, short);
        let table = mpir::resolve(&entries, &addresses, &strings);
        assert_eq!(table.entries.len(), entries.len());
    }
}

/// The `mqs_communicator` decoder, with an ABI or arbitrary given layout.
pub fn communicator(data: &[u8]) {
    let mut input = Input(data);
    let model = input.model();
    let layout = if input.u8() % 2 == 0 {
        CommunicatorLayout::abi(&model)
    } else {
        let ty = input.type_layout(
            "mqs_communicator",
            &["unique_id", "local_rank", "size", "name"],
        );
        match CommunicatorLayout::from_type(&ty, &model) {
            Ok(l) => l,
            Err(_) => return,
        }
    };
    let address = input.u64();
    let _ = mqd::decode_communicator(&model, &layout, address, input.rest());
}

/// The `mqs_pending_operation` decoder and normalisation, with an ABI or given layout.
pub fn pending_operation(data: &[u8]) {
    let mut input = Input(data);
    let model = input.model();
    let layout = if input.u8() % 2 == 0 {
        PendingOperationLayout::abi(&model)
    } else {
        let ty = input.type_layout(
            "mqs_pending_operation",
            &[
                "status",
                "desired_local_rank",
                "desired_global_rank",
                "tag_wild",
                "desired_tag",
                "desired_length",
                "system_buffer",
                "buffer",
                "actual_local_rank",
                "actual_global_rank",
                "actual_tag",
                "actual_length",
                "extra_text",
            ],
        );
        match PendingOperationLayout::from_type(&ty, &model) {
            Ok(l) => l,
            Err(_) => return,
        }
    };
    let class = OpClass::from_raw(i64::from(input.u8() % 3)).unwrap_or(OpClass::Send);
    let unit = match input.u8() % 3 {
        0 => mqd::LengthUnit::Bytes,
        1 => mqd::LengthUnit::Elements { element_size: None },
        _ => mqd::LengthUnit::Elements {
            element_size: Some(input.size()),
        },
    };
    let address = input.u64();
    if let Ok(op) = mqd::decode_pending_operation(&model, &layout, address, input.rest()) {
        let n = mqd::normalize(&op, class, unit);
        assert!(n.extra_text.len() <= 5);
    }
}

/// The scalar and string readers of [`View`] at arbitrary offsets, widths and bounds.
pub fn view(data: &[u8]) {
    let mut input = Input(data);
    let model = input.model();
    let base = input.u64();
    let (offset, width, max) = (input.size(), input.size(), input.size());
    let v = View::new(model, base, input.rest());
    let _ = v.uint(offset, width, "u");
    let _ = v.int(offset, width, "i");
    let _ = v.pointer(offset, "p");
    let _ = v.c_long(offset, "l");
    let _ = v.char_array(offset, width, "a");
    let _ = v.address_of(offset, "o");
    if let Ok(s) = v.cstr(offset, max, "s") {
        assert!(s.len() as u64 <= max && !s.contains(&0));
    }
}

/// A harness: arbitrary bytes in, no panic out.
pub type Harness = fn(&[u8]);

/// Every harness, by name (for the test suite and tooling).
pub const ALL: [(&str, Harness); 4] = [
    ("proctable", proctable),
    ("communicator", communicator),
    ("pending_operation", pending_operation),
    ("view", view),
];
