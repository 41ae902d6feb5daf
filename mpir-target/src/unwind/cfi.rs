//! Call frame information of one image: `.eh_frame` (looked up through `.eh_frame_hdr`'s binary
//! search table when there is one) and `.debug_frame` (of the image or of its separate debug
//! file), read with gimli's CFI reader, and one step of unwinding with it.
//!
//! Everything here works in the image's link-time addresses: the caller subtracts the load bias
//! before a lookup.

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EhFrameHdr, EndianSlice, Endianity, Evaluation,
    EvaluationResult, Location, Register, RegisterRule, RunTimeEndian, UnwindContext,
    UnwindSection, Value,
};
use object::{Object, ObjectSection};

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use super::regs::Registers;
use crate::debuginfo::ElfFile;
use crate::traits::Memory;

/// Steps a DWARF expression of the CFI may take (a hostile expression must not spin).
const MAX_EXPRESSION_STEPS: u32 = 1000;
/// Memory and register requests of one expression.
const MAX_EXPRESSION_REQUESTS: usize = 64;
/// Unwind rows remembered per image, by address (past this, rows are computed, not kept).
const MAX_REMEMBERED_ROWS: usize = 1 << 16;

/// The rules of one address, computed once from its FDE and CIE and kept: every later frame at
/// that address (other threads, other samples, other processes sharing the image) applies them
/// without parsing the CIE and FDE again.
#[derive(Debug)]
struct Row {
    row: gimli::UnwindTableRow<usize>,
    return_address: Register,
    signal_frame: bool,
    /// Found in `.debug_frame` (its expressions are read from there), not `.eh_frame`.
    debug_frame: bool,
}

/// What the lookup of one address found.
enum Found {
    NoInfo,
    Failed(String),
    Row(Arc<Row>),
}

type Slice<'a> = EndianSlice<'a, RunTimeEndian>;

/// A section's bytes and its link-time address.
#[derive(Debug, Default)]
struct Section {
    data: Vec<u8>,
    address: u64,
}

impl Section {
    fn read<'d, R: object::ReadRef<'d>>(obj: &object::File<'d, R>, name: &str) -> Option<Section> {
        let s = obj.section_by_name(name)?;
        let data = s.uncompressed_data().ok()?.into_owned();
        (!data.is_empty()).then_some(Section {
            data,
            address: s.address(),
        })
    }
}

/// The CFI sections of one image (and of its debug file).
#[derive(Debug, Default)]
pub(super) struct ImageCfi {
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    debug_frame: Option<Section>,
    text: u64,
    got: u64,
    endian: Option<RunTimeEndian>,
    address_size: u8,
    /// An x86 (i386 or x86_64) file.
    x86: bool,
    /// The separate debug file, whose `.debug_frame` is read on the first miss (reading a
    /// large debug file whole for CFI that `.eh_frame` nearly always has would be waste).
    debug_file: Option<Arc<ElfFile>>,
    debug_file_frame: OnceLock<Option<Section>>,
    /// Rows already computed, by link-time address.
    rows: RwLock<HashMap<u64, Arc<Row>>>,
}

/// The state gimli's CFI evaluation needs, reused from frame to frame of a walk.
pub(super) type Context = UnwindContext<usize>;

/// What one CFI step found (one per frame, never stored: its size does not matter).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(super) enum Step {
    /// No FDE covers the address.
    NoInfo,
    /// The CFI is there but could not be used (malformed, or an expression failed).
    Failed(String),
    /// The CFI says where the caller's registers are, but the stack there cannot be read.
    Unreadable(String),
    /// The caller's registers.
    Caller {
        /// Registers of the caller (its pc from the return-address column, or absent when the
        /// CFI says the return address is undefined: the outermost frame).
        regs: Registers,
        /// This frame's canonical frame address.
        cfa: u64,
        /// This frame's FDE is a signal trampoline (augmentation "S"): the caller's pc is the
        /// interrupted instruction itself, not a return address.
        signal_frame: bool,
    },
}

impl ImageCfi {
    /// Reads the CFI sections of `image` and `debug` (a separate debug file, for its
    /// `.debug_frame`). Malformed files give an empty table, which unwinds nothing.
    pub(super) fn load<'d, R: object::ReadRef<'d>>(
        image: Option<R>,
        debug: Option<Arc<ElfFile>>,
    ) -> ImageCfi {
        let mut cfi = ImageCfi::default();
        if let Some(obj) = image.and_then(|d| object::File::parse(d).ok()) {
            cfi.endian = Some(endian(&obj));
            cfi.address_size = if obj.is_64() { 8 } else { 4 };
            cfi.x86 = matches!(
                obj.architecture(),
                object::Architecture::X86_64 | object::Architecture::I386
            );
            cfi.eh_frame = Section::read(&obj, ".eh_frame");
            cfi.eh_frame_hdr = Section::read(&obj, ".eh_frame_hdr");
            cfi.debug_frame = Section::read(&obj, ".debug_frame");
            cfi.text = obj.section_by_name(".text").map_or(0, |s| s.address());
            cfi.got = obj.section_by_name(".got").map_or(0, |s| s.address());
        }
        cfi.debug_file = debug;
        cfi
    }

    /// `.debug_frame`: the image's own, else its debug file's (read on first use).
    fn debug_frame(&self) -> Option<&Section> {
        if self.debug_frame.is_some() {
            return self.debug_frame.as_ref();
        }
        self.debug_file_frame
            .get_or_init(|| {
                let data = self.debug_file.as_ref()?.data().ok()?;
                let obj = object::File::parse(&data[..]).ok()?;
                Section::read(&obj, ".debug_frame")
            })
            .as_ref()
    }

    fn bases(&self) -> BaseAddresses {
        let mut b = BaseAddresses::default()
            .set_text(self.text)
            .set_got(self.got);
        if let Some(s) = &self.eh_frame {
            b = b.set_eh_frame(s.address);
        }
        if let Some(s) = &self.eh_frame_hdr {
            b = b.set_eh_frame_hdr(s.address);
        }
        b
    }

    /// Whether the image is x86 code (i386 or x86_64).
    pub(super) fn is_x86(&self) -> bool {
        self.x86
    }

    /// The start of the FDE covering link-time address `address` (`.eh_frame`, then
    /// `.debug_frame`).
    pub(super) fn fde_start(&self, address: u64) -> Option<u64> {
        let endian = self.endian?;
        let bases = self.bases();
        if let Some(eh) = &self.eh_frame {
            let mut section = EhFrame::new(&eh.data, endian);
            section.set_address_size(self.address_size);
            if let Ok(fde) = self.eh_fde(&section, endian, &bases, address) {
                return Some(fde.initial_address());
            }
        }
        let df = self.debug_frame()?;
        let mut section = DebugFrame::new(&df.data, endian);
        section.set_address_size(self.address_size);
        section
            .fde_for_address(&bases, address, DebugFrame::cie_from_offset)
            .ok()
            .map(|fde| fde.initial_address())
    }

    /// Whether an FDE covers link-time address `address`.
    pub(super) fn covers(&self, address: u64) -> bool {
        let Some(endian) = self.endian else {
            return false;
        };
        let bases = self.bases();
        if let Some(eh) = &self.eh_frame {
            let mut section = EhFrame::new(&eh.data, endian);
            section.set_address_size(self.address_size);
            if self.eh_fde(&section, endian, &bases, address).is_ok() {
                return true;
            }
        }
        if let Some(df) = self.debug_frame() {
            let mut section = DebugFrame::new(&df.data, endian);
            section.set_address_size(self.address_size);
            return section
                .fde_for_address(&bases, address, DebugFrame::cie_from_offset)
                .is_ok();
        }
        false
    }

    /// The `.eh_frame` FDE covering `address`: through `.eh_frame_hdr`'s binary search table
    /// when there is one, else by a scan of the section.
    fn eh_fde<'a>(
        &'a self,
        section: &EhFrame<Slice<'a>>,
        endian: RunTimeEndian,
        bases: &BaseAddresses,
        address: u64,
    ) -> gimli::Result<gimli::FrameDescriptionEntry<Slice<'a>>> {
        let hdr = self.eh_frame_hdr.as_ref().and_then(|h| {
            // gimli's table lookup multiplies the header's FDE count unchecked: a corrupt
            // count overflows it. A table that does not hold the rows its header claims is
            // not used (the section is scanned instead).
            hdr_table_fits(&h.data, endian, self.address_size)
                .then(|| EhFrameHdr::new(&h.data, endian).parse(bases, self.address_size))
                .and_then(Result::ok)
        });
        // The table, when there is one, is authoritative: a miss there is a miss (scanning the
        // whole section for every word a stack scan looks at would be slow).
        match hdr.as_ref().and_then(|h| h.table()) {
            Some(table) => {
                // gimli's `fde_for_address` subtracts the hdr's `.eh_frame` pointer from the
                // table's entry unchecked (a corrupt table underflows): the offset is computed
                // here, from the section's own address, with a checked subtraction.
                let entry = table.lookup(address, bases)?.direct()?;
                let eh_address = self.eh_frame.as_ref().map_or(0, |s| s.address);
                let offset = entry
                    .checked_sub(eh_address)
                    .and_then(|o| usize::try_from(o).ok())
                    .ok_or(gimli::Error::NoUnwindInfoForAddress)?;
                let fde = section.fde_from_offset(
                    bases,
                    gimli::EhFrameOffset(offset),
                    EhFrame::cie_from_offset,
                )?;
                if fde.contains(address) {
                    Ok(fde)
                } else {
                    Err(gimli::Error::NoUnwindInfoForAddress)
                }
            }
            None => section.fde_for_address(bases, address, EhFrame::cie_from_offset),
        }
    }

    /// The row an FDE found in `section` (`name` for messages) gives at `address`.
    fn row_of<'a, S: UnwindSection<Slice<'a>>>(
        section: &S,
        fde: &gimli::FrameDescriptionEntry<Slice<'a>>,
        bases: &BaseAddresses,
        ctx: &mut UnwindContext<usize>,
        address: u64,
        debug_frame: bool,
    ) -> Found {
        let name = if debug_frame {
            ".debug_frame"
        } else {
            ".eh_frame"
        };
        match fde.unwind_info_for_address(section, bases, ctx, address) {
            Ok(row) => Found::Row(Arc::new(Row {
                row: row.clone(),
                return_address: fde.cie().return_address_register(),
                signal_frame: fde.is_signal_trampoline(),
                debug_frame,
            })),
            Err(e) => Found::Failed(format!("{name} at {address:#x}: {e}")),
        }
    }

    /// The rules at link-time address `address`, computed from the FDE covering it
    /// (`.eh_frame` first, then `.debug_frame`) and remembered.
    fn find(&self, ctx: &mut UnwindContext<usize>, address: u64) -> Found {
        let Some(endian) = self.endian else {
            return Found::NoInfo;
        };
        let bases = self.bases();
        let mut found = Found::NoInfo;
        if let Some(eh) = &self.eh_frame {
            let mut section = EhFrame::new(&eh.data, endian);
            section.set_address_size(self.address_size);
            if let Ok(fde) = self.eh_fde(&section, endian, &bases, address) {
                found = Self::row_of(&section, &fde, &bases, ctx, address, false);
            }
        }
        if matches!(found, Found::NoInfo)
            && let Some(df) = self.debug_frame()
        {
            let mut section = DebugFrame::new(&df.data, endian);
            section.set_address_size(self.address_size);
            if let Ok(fde) = section.fde_for_address(&bases, address, DebugFrame::cie_from_offset) {
                found = Self::row_of(&section, &fde, &bases, ctx, address, true);
            }
        }
        if let Found::Row(row) = &found {
            let mut rows = self.rows.write().unwrap_or_else(|e| e.into_inner());
            if rows.len() < MAX_REMEMBERED_ROWS {
                rows.insert(address, Arc::clone(row));
            }
        }
        found
    }

    /// One step: the caller of the frame whose registers are `regs`, looking the CFI up at
    /// link-time address `address` (the pc, or the pc minus one for a return address).
    pub(super) fn step(
        &self,
        ctx: &mut UnwindContext<usize>,
        memory: &dyn Memory,
        regs: &Registers,
        address: u64,
    ) -> Step {
        // A remembered row is applied under the read lock, without touching its reference
        // count: the hot path of a repeated sample is two uncontended atomic operations.
        if let Some(row) = self
            .rows
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&address)
        {
            return self.apply_row(row, memory, regs);
        }
        match self.find(ctx, address) {
            Found::NoInfo => Step::NoInfo,
            Found::Failed(e) => Step::Failed(e),
            Found::Row(row) => self.apply_row(&row, memory, regs),
        }
    }

    /// The caller's registers by `row`'s rules.
    fn apply_row(&self, row: &Row, memory: &dyn Memory, regs: &Registers) -> Step {
        let endian = self.endian.unwrap_or(RunTimeEndian::Little);
        let empty: &[u8] = &[];
        let (debug_frame, eh_frame);
        let section: Expressions<'_, '_> = if row.debug_frame {
            let data = self.debug_frame().map_or(empty, |s| &s.data[..]);
            let mut s = DebugFrame::new(data, endian);
            s.set_address_size(self.address_size);
            debug_frame = s;
            &|e| e.get(&debug_frame).map(|e| e.0)
        } else {
            let data = self.eh_frame.as_ref().map_or(empty, |s| &s.data[..]);
            let mut s = EhFrame::new(data, endian);
            s.set_address_size(self.address_size);
            eh_frame = s;
            &|e| e.get(&eh_frame).map(|e| e.0)
        };
        apply(
            section,
            &row.row,
            row.return_address,
            memory,
            regs,
            self.address_size,
            row.signal_frame,
        )
    }
}

fn endian<'d, R: object::ReadRef<'d>>(obj: &object::File<'d, R>) -> RunTimeEndian {
    if obj.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    }
}

fn read_word(memory: &dyn Memory, address: u64, size: u8) -> Result<u64, String> {
    let size = usize::from(size.min(8));
    let mut buf = [0u8; 8];
    let slot = buf.get_mut(..size).unwrap_or_default();
    memory
        .read_exact(address, slot)
        .map_err(|e| format!("reading the stack at {address:#x}: {e}"))?;
    let value = match memory.data_model().byte_order() {
        mpir_types::ByteOrder::Little => u64::from_le_bytes(buf),
        mpir_types::ByteOrder::Big => u64::from_be_bytes(buf) >> (64 - 8 * size as u32),
    };
    Ok(value)
}

/// An expression's bytecode, read from the section its FDE is in.
type Expressions<'s, 'a> = &'s dyn Fn(&gimli::UnwindExpression<usize>) -> gimli::Result<Slice<'a>>;

fn apply(
    section: Expressions<'_, '_>,
    row: &gimli::UnwindTableRow<usize>,
    ra: Register,
    memory: &dyn Memory,
    regs: &Registers,
    address_size: u8,
    signal_frame: bool,
) -> Step {
    let cfa = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => match regs.get(register.0) {
            Some(v) => v.wrapping_add_signed(*offset),
            None => return Step::Failed(format!("the CFA needs register {}", register.0)),
        },
        CfaRule::Expression(e) => match section(e)
            .map_err(|e| e.to_string())
            .and_then(|e| evaluate(e, memory, regs, address_size, None))
        {
            Ok(v) => v,
            Err(e) => return Step::Failed(format!("the CFA expression: {e}")),
        },
    };
    let mut caller = *regs;
    let arch = regs.arch;
    caller.set(arch.sp_reg(), cfa);
    // The return address column is "undefined" unless a rule says otherwise.
    caller.clear(arch.pc_reg());
    for (reg, rule) in row.registers() {
        let value = match rule {
            RegisterRule::Undefined => {
                caller.clear(reg.0);
                continue;
            }
            RegisterRule::SameValue => regs.get(reg.0),
            RegisterRule::Offset(o) => {
                match read_word(memory, cfa.wrapping_add_signed(*o), address_size) {
                    Ok(v) => Some(v),
                    Err(e) => return Step::Unreadable(e),
                }
            }
            RegisterRule::ValOffset(o) => Some(cfa.wrapping_add_signed(*o)),
            RegisterRule::Register(r) => regs.get(r.0),
            RegisterRule::Expression(e) => {
                let at = section(e)
                    .map_err(|e| e.to_string())
                    .and_then(|e| evaluate(e, memory, regs, address_size, Some(cfa)))
                    .and_then(|a| read_word(memory, a, address_size));
                match at {
                    Ok(v) => Some(v),
                    Err(e) => return Step::Failed(format!("register {}: {e}", reg.0)),
                }
            }
            RegisterRule::ValExpression(e) => {
                match section(e)
                    .map_err(|e| e.to_string())
                    .and_then(|e| evaluate(e, memory, regs, address_size, Some(cfa)))
                {
                    Ok(v) => Some(v),
                    Err(e) => return Step::Failed(format!("register {}: {e}", reg.0)),
                }
            }
            RegisterRule::Constant(c) => Some(*c),
            _ => None,
        };
        match value {
            Some(v) => caller.set(reg.0, v),
            None => caller.clear(reg.0),
        }
    }
    // The caller's pc is what the return-address column holds.
    if ra != Register(arch.pc_reg()) {
        match caller.get(ra.0) {
            Some(v) => caller.set(arch.pc_reg(), v),
            None => caller.clear(arch.pc_reg()),
        }
    }
    Step::Caller {
        regs: caller,
        cfa,
        signal_frame,
    }
}

/// Evaluates a CFI expression to an address (or value), bounded.
fn evaluate(
    bytecode: Slice<'_>,
    memory: &dyn Memory,
    regs: &Registers,
    address_size: u8,
    cfa: Option<u64>,
) -> Result<u64, String> {
    let encoding = gimli::Encoding {
        format: gimli::Format::Dwarf32,
        version: 4,
        address_size,
    };
    let mut eval = Evaluation::new(bytecode, encoding);
    eval.set_max_iterations(MAX_EXPRESSION_STEPS);
    if let Some(cfa) = cfa {
        eval.set_initial_value(cfa);
    }
    let mut state = eval.evaluate().map_err(|e| e.to_string())?;
    for _ in 0..MAX_EXPRESSION_REQUESTS {
        state = match state {
            EvaluationResult::Complete => {
                let pieces = eval.result();
                return match pieces.first().map(|p| &p.location) {
                    Some(Location::Address { address }) => Ok(*address),
                    Some(Location::Value {
                        value: Value::Generic(v),
                    }) => Ok(*v),
                    Some(Location::Register { register }) => regs
                        .get(register.0)
                        .ok_or_else(|| format!("register {} unknown", register.0)),
                    _ => Err("the expression has no usable result".to_string()),
                };
            }
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let v = read_word(memory, address, size)?;
                eval.resume_with_memory(Value::Generic(v))
                    .map_err(|e| e.to_string())?
            }
            EvaluationResult::RequiresRegister { register, .. } => {
                let v = regs
                    .get(register.0)
                    .ok_or_else(|| format!("register {} unknown", register.0))?;
                eval.resume_with_register(Value::Generic(v))
                    .map_err(|e| e.to_string())?
            }
            other => return Err(format!("unsupported expression request {other:?}")),
        };
    }
    Err("the expression made too many requests".to_string())
}

/// Whether `.eh_frame_hdr`'s binary-search table (`hdr`, the whole section) holds the rows its
/// header claims: version, the three encodings, the `.eh_frame` pointer, the FDE count, then
/// count × 2 table entries. Only fixed-size encodings are understood; any other is "no".
fn hdr_table_fits(hdr: &[u8], endian: RunTimeEndian, address_size: u8) -> bool {
    let size = |encoding: u8| match encoding & 0x0f {
        0x00 => Some(usize::from(address_size)),
        0x02 | 0x0a => Some(2),
        0x03 | 0x0b => Some(4),
        0x04 | 0x0c => Some(8),
        _ => None,
    };
    let (Some(&ptr), Some(&count), Some(&table)) = (hdr.get(1), hdr.get(2), hdr.get(3)) else {
        return false;
    };
    let (Some(ptr_size), Some(count_size), Some(row)) = (size(ptr), size(count), size(table))
    else {
        return false;
    };
    let at = 4 + ptr_size;
    let Some(bytes) = hdr.get(at..at + count_size) else {
        return false;
    };
    let mut word = [0u8; 8];
    if endian.is_big_endian() {
        word[8 - count_size..].copy_from_slice(bytes);
    } else {
        word[..count_size].copy_from_slice(bytes);
    }
    let n = if endian.is_big_endian() {
        u64::from_be_bytes(word)
    } else {
        u64::from_le_bytes(word)
    };
    let signed_negative = count & 0x08 != 0 && bytes_sign(bytes, endian);
    let rest = (hdr.len() - at - count_size) as u64;
    !signed_negative
        && n.checked_mul(2 * row as u64)
            .is_some_and(|need| need <= rest)
}

/// Whether the most significant bit of the little- or big-endian integer `bytes` is set.
fn bytes_sign(bytes: &[u8], endian: RunTimeEndian) -> bool {
    let top = if endian.is_big_endian() {
        bytes.first()
    } else {
        bytes.last()
    };
    top.is_some_and(|b| b & 0x80 != 0)
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_eh_frame_hdr_table_must_hold_the_rows_its_header_claims() {
        // version 1, .eh_frame pointer pcrel|sdata4, count udata4, table datarel|sdata4.
        let hdr = |count: u32, rows: usize| {
            let mut h = vec![1, 0x1b, 0x03, 0x3b];
            h.extend_from_slice(&0x100i32.to_le_bytes());
            h.extend_from_slice(&count.to_le_bytes());
            h.extend(std::iter::repeat_n(0u8, rows * 8));
            h
        };
        let le = RunTimeEndian::Little;
        assert!(hdr_table_fits(&hdr(3, 3), le, 8));
        assert!(hdr_table_fits(&hdr(0, 0), le, 8));
        assert!(!hdr_table_fits(&hdr(4, 3), le, 8));
        // A count whose table size overflows (gimli multiplies it unchecked).
        assert!(!hdr_table_fits(&hdr(u32::MAX, 3), le, 8));
        let mut huge = hdr(0, 1);
        huge[2] = 0x04; // udata8 count
        huge.splice(8..12, u64::MAX.to_le_bytes());
        assert!(!hdr_table_fits(&huge, le, 8));
        // A negative signed count, a variable-length encoding, a truncated header.
        let mut negative = hdr(u32::MAX, 3);
        negative[2] = 0x0b;
        assert!(!hdr_table_fits(&negative, le, 8));
        let mut uleb = hdr(1, 1);
        uleb[2] = 0x01;
        assert!(!hdr_table_fits(&uleb, le, 8));
        assert!(!hdr_table_fits(&[1, 0x1b], le, 8));
    }
    use super::*;
    use crate::mock::MockTarget;
    use crate::unwind::regs::Arch;
    use mpir_types::DataModel;
    use proptest::prelude::*;

    fn table(eh_frame: Vec<u8>, hdr: Vec<u8>, debug_frame: Vec<u8>) -> ImageCfi {
        let section =
            |data: Vec<u8>, address| (!data.is_empty()).then_some(Section { data, address });
        ImageCfi {
            eh_frame: section(eh_frame, 0x2000),
            eh_frame_hdr: section(hdr, 0x1000),
            debug_frame: section(debug_frame, 0),
            text: 0x4000,
            got: 0x8000,
            endian: Some(RunTimeEndian::Little),
            address_size: 8,
            ..ImageCfi::default()
        }
    }

    #[test]
    fn no_sections_no_info() {
        let cfi = ImageCfi::load(None::<&[u8]>, None);
        let mem = MockTarget::builder(DataModel::LP64).build();
        let regs = Registers::new(Arch::X86_64, 0x4000, 0x7000, 0);
        assert!(matches!(
            cfi.step(&mut UnwindContext::new(), &mem, &regs, 0x4000),
            Step::NoInfo
        ));
        assert!(!cfi.covers(0x4000));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "opens files: Miri's isolation has no file system (HARDENING.md, section Miri)"
    )]
    fn this_binarys_own_cfi_covers_its_code() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let cfi = ImageCfi::load(Some(&exe[..]), None);
        assert!(cfi.eh_frame.is_some());
        let obj = object::File::parse(&*exe).unwrap();
        let text = obj.section_by_name(".text").unwrap().address();
        // Some FDE covers some address early in .text (the very first bytes may be padding).
        assert!((0..4096).any(|o| cfi.covers(text + o)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Garbage CFI never panics: random sections, random addresses and registers.
        #[test]
        #[cfg_attr(
            miri,
            ignore = "proptest's failure file needs the working directory, which Miri's isolation forbids"
        )]
        fn garbage_cfi_never_panics(
            eh in proptest::collection::vec(any::<u8>(), 0..512),
            hdr in proptest::collection::vec(any::<u8>(), 0..64),
            df in proptest::collection::vec(any::<u8>(), 0..512),
            address in 0x3f00u64..0x4200,
            sp in any::<u64>(),
        ) {
            let cfi = table(eh, hdr, df);
            let mut b = MockTarget::builder(DataModel::LP64);
            b.map(0x7000, vec![0x41; 256], crate::mock::Access::READ_WRITE);
            let mem = b.build();
            let regs = Registers::new(Arch::X86_64, address, sp, 0x7000);
            let _ = cfi.covers(address);
            let _ = cfi.step(&mut UnwindContext::new(), &mem, &regs, address);
        }

        /// This binary's real CFI with bytes overwritten: a corrupt FDE or CIE gives no
        /// caller or a failure, never a panic.
        #[test]
        #[cfg_attr(
            miri,
            ignore = "proptest's failure file needs the working directory, which Miri's isolation forbids"
        )]
        fn mutated_real_cfi_never_panics(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
            at in any::<prop::sample::Index>(),
            sp in 0x7000u64..0x7100,
        ) {
            static EXE: std::sync::LazyLock<Vec<u8>> =
                std::sync::LazyLock::new(|| std::fs::read("/proc/self/exe").unwrap());
            let mut cfi = ImageCfi::load(Some(&EXE[..]), None);
            let text = cfi.text;
            if let Some(eh) = cfi.eh_frame.as_mut() {
                for (i, b) in &edits {
                    let n = eh.data.len();
                    eh.data[i.index(n)] = *b;
                }
            }
            if let Some(hdr) = cfi.eh_frame_hdr.as_mut() {
                let n = hdr.data.len();
                hdr.data[at.index(n)] ^= 0xff;
            }
            let mut b = MockTarget::builder(DataModel::LP64);
            b.map(0x7000, vec![0x41; 512], crate::mock::Access::READ_WRITE);
            let mem = b.build();
            let address = text + at.index(1 << 16) as u64;
            let regs = Registers::new(Arch::X86_64, address, sp, 0x7000);
            let _ = cfi.covers(address);
            let _ = cfi.step(&mut UnwindContext::new(), &mem, &regs, address);
        }
    }
}
