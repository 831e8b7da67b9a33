package ssd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/kvpool/kvpool/block"
	"github.com/kvpool/kvpool/internal/vfs"
)

// Slot layout. A slot is a header region followed by a payload region:
//
//	[0, 4096)            header (headerLen bytes used, the rest zero)
//	[4096, 4096+P)       payload, P = BlockSize rounded up to 4096
//
// Header fields, little endian:
//
//	0   magic        u32  headerMagic; 0 means "no block" (invalidated)
//	4   version      u16  formatVersion
//	6   tenant len   u8
//	7   reserved     u8   0
//	8   slot         u32  the slot's own number (catches misplaced I/O)
//	12  payload len  u32
//	16  key id       u64
//	24  generation   u64  tier-wide, increasing per put
//	32  payload sum  u32  block.Checksum(key, payload)
//	36  tenant       [64]byte, zero padded
//	100 header CRC   u32  CRC-32C of bytes [0, 100)
//
// A put writes the payload first and the header last: the header is the
// commit record, and the header CRC plus the payload checksum detect a
// write torn anywhere or reordered by the device.
const (
	headerSize    = vfs.DirectIOAlign
	headerLen     = 104
	headerMagic   = 0x4b565342 // "BSVK" little endian: kvpool SSD block
	formatVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is a decoded slot header.
type header struct {
	slot uint32
	key  block.Key
	n    uint32
	sum  uint32
	gen  uint64
}

// encode writes h into b[:headerLen].
func (h *header) encode(b []byte) {
	b = b[:headerLen]
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], headerMagic)
	binary.LittleEndian.PutUint16(b[4:], formatVersion)
	b[6] = byte(len(h.key.Tenant))
	binary.LittleEndian.PutUint32(b[8:], h.slot)
	binary.LittleEndian.PutUint32(b[12:], h.n)
	binary.LittleEndian.PutUint64(b[16:], h.key.ID)
	binary.LittleEndian.PutUint64(b[24:], h.gen)
	binary.LittleEndian.PutUint32(b[32:], h.sum)
	copy(b[36:36+block.MaxTenantLen], h.key.Tenant)
	binary.LittleEndian.PutUint32(b[100:], crc32.Checksum(b[:100], castagnoli))
}

// errEmptySlot marks a header region that holds no block.
var errEmptySlot = errors.New("empty slot")

// decodeHeader parses the header of slot from b. It returns errEmptySlot
// for an invalidated or never-written slot and a descriptive error for a
// torn or corrupt header.
func decodeHeader(b []byte, slot uint32, blockSize int) (header, error) {
	if len(b) < headerLen {
		return header{}, fmt.Errorf("header: %d bytes, want %d", len(b), headerLen)
	}
	magic := binary.LittleEndian.Uint32(b[0:])
	if magic == 0 {
		return header{}, errEmptySlot
	}
	if magic != headerMagic {
		return header{}, fmt.Errorf("header: bad magic %#08x", magic)
	}
	if want, got := crc32.Checksum(b[:100], castagnoli), binary.LittleEndian.Uint32(b[100:]); want != got {
		return header{}, fmt.Errorf("header: CRC %08x, computed %08x", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != formatVersion {
		return header{}, fmt.Errorf("header: format version %d, want %d", v, formatVersion)
	}
	tl := int(b[6])
	if tl > block.MaxTenantLen {
		return header{}, fmt.Errorf("header: tenant length %d over %d", tl, block.MaxTenantLen)
	}
	h := header{
		slot: binary.LittleEndian.Uint32(b[8:]),
		n:    binary.LittleEndian.Uint32(b[12:]),
		key:  block.Key{ID: binary.LittleEndian.Uint64(b[16:]), Tenant: string(b[36 : 36+tl])},
		gen:  binary.LittleEndian.Uint64(b[24:]),
		sum:  binary.LittleEndian.Uint32(b[32:]),
	}
	switch {
	case h.slot != slot:
		return header{}, fmt.Errorf("header: names slot %d", h.slot)
	case int64(h.n) > int64(blockSize):
		return header{}, fmt.Errorf("header: payload length %d over block size %d", h.n, blockSize)
	}
	if err := h.key.Validate(); err != nil {
		return header{}, fmt.Errorf("header: %w", err)
	}
	return h, nil
}

// alignedBuf returns n bytes whose address is a multiple of
// vfs.DirectIOAlign, as O_DIRECT requires.
func alignedBuf(n int) []byte {
	b := make([]byte, n+vfs.DirectIOAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (vfs.DirectIOAlign - 1)); r != 0 {
		skip = vfs.DirectIOAlign - r
	}
	return b[skip : skip+n : skip+n]
}

// The geometry file records what the slot files were formatted with, so
// that reopening a directory with another BlockSize or SlotsPerFile fails
// clearly instead of reading every slot at the wrong offset.
const (
	geometryFile  = "ssd.geometry"
	slotFilePref  = "slots-"
	slotFileSuff  = ".dat"
	geometryMagic = "kvpool-ssd"
)

func slotFileName(i int) string { return fmt.Sprintf("%s%03d%s", slotFilePref, i, slotFileSuff) }

// parseSlotFileName returns the index of a slot file name.
func parseSlotFileName(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, slotFilePref)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, slotFileSuff)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0
}

type geometry struct {
	version      int
	blockSize    int
	slotsPerFile int
}

func (g geometry) encode() []byte {
	return fmt.Appendf(nil, "%s %d\nblock_size %d\nslots_per_file %d\n", geometryMagic, g.version, g.blockSize, g.slotsPerFile)
}

func parseGeometry(b []byte) (geometry, error) {
	var g geometry
	_, err := fmt.Fscanf(bytes.NewReader(b), geometryMagic+" %d\nblock_size %d\nslots_per_file %d\n", &g.version, &g.blockSize, &g.slotsPerFile)
	if err != nil {
		return g, fmt.Errorf("parse %q: %w", b, err)
	}
	return g, nil
}

// checkGeometry reads dir's geometry file, or writes it when the directory
// holds no slot files yet.
func checkGeometry(fs vfs.FS, dir string, want geometry, names []string) error {
	path := filepath.Join(dir, geometryFile)
	size, err := fs.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		for _, n := range names {
			if _, ok := parseSlotFileName(n); ok {
				return fmt.Errorf("%s holds slot files but no %s: not a kvpool SSD tier, or damaged; use an empty directory", dir, geometryFile)
			}
		}
		return writeGeometry(fs, dir, want)
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	b := make([]byte, min(size, 4096))
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	got, err := parseGeometry(b)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if got != want {
		return fmt.Errorf("%s was formatted with format %d, block size %d, %d slots per file; the options ask for format %d, block size %d, %d slots per file: use the same options or an empty directory",
			dir, got.version, got.blockSize, got.slotsPerFile, want.version, want.blockSize, want.slotsPerFile)
	}
	return nil
}

func writeGeometry(fs vfs.FS, dir string, g geometry) error {
	path := filepath.Join(dir, geometryFile)
	tmp := path + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	b := g.encode()
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
