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

// On-disk layout (format 2).
//
// Data: preallocated page files pages-NNN.dat of PagesPerFile pages of
// PageSize bytes; page p is at offset (p % PagesPerFile) * PageSize of
// file p / PagesPerFile. An object is a record
//
//	[tenant][name][payload]
//
// laid over a chain of pages: byte j of the record is at byte j % PageSize
// of the chain's page j / PageSize. The chain's pages need not be adjacent.
// When putting the tenant and name in front of the payload would cost a
// page more than the payload alone (a payload that fills its last page:
// a 32 KiB block would take 9 pages, not 8) and they fit in the head
// entry's key area (keyArea bytes), they go there instead and the record
// is the payload alone.
//
// Side table: pages.tbl holds one entry of entrySize bytes per page, entry
// p at offset p*entrySize. Fields, little endian:
//
//	0   magic        u32  entryMagic; 0 means "page holds nothing"
//	4   kind         u8   kindHead or kindCont
//	5   tenant len   u8   (head)
//	6   name len     u16  (head)
//	8   generation   u64  the record's: tier-wide, increasing per put
//	16  next page    u32  the chain's next page, noPage at the end
//	20  head page    u32  (continuation) the record's first page
//	    payload len  u32  (head)
//	24  seq          u32  (continuation) this page's position in the chain
//	    payload sum  u32  (head) block.Checksum(key, payload)
//	28  key id       u64  (head)
//	36  flags        u8   (head) flagKeyInEntry: tenant and name are in the key area
//	37  key area     [23]byte (head) tenant and name (flagKeyInEntry), or
//	                 block.KeySum(key) u32 (they are in the data, checked at scan)
//	60  entry CRC    u32  CRC-32C of the page number (u32) then bytes [0, 60):
//	                 an entry written at another page's place fails it
//
// A put writes the data pages, then the continuation entries, then the
// head entry: the head entry is the commit record. At Open a head counts
// only when every page of its chain has an entry with the head's
// generation, head page and position, and its tenant and name (and,
// verifying, the payload checksum) read back.
const (
	// PageSize is the unit of allocation and of O_DIRECT I/O.
	PageSize = vfs.DirectIOAlign
	// entrySize is one side-table entry: 64 bytes per 4 KiB page, 1.6%.
	entrySize      = 64
	keyArea        = 60 - 37
	entryMagic     = 0x4b565350 // "PSVK" little endian: kvpool SSD page
	kindHead       = 1
	kindCont       = 2
	flagKeyInEntry = 1
	noPage         = ^uint32(0)
	formatVersion  = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a decoded side-table entry.
type entry struct {
	kind   uint8
	tl     uint8
	nl     uint16
	gen    uint64
	head   uint32 // the head's own page for a head entry
	next   uint32
	seq    uint32 // 0 for a head entry
	n      uint32
	sum    uint32
	id     uint64
	inKey  bool   // tenant and name are in key, not in the data
	key    string // tenant then name (inKey)
	keySum uint32 // block.KeySum of the key (!inKey)
	pages  uint32 // derived: the chain's length
	page   uint32 // derived: the entry's own page
}

// prefixLen is the number of record bytes in front of the payload.
func (e *entry) prefixLen() int {
	if e.inKey {
		return 0
	}
	return int(e.tl) + int(e.nl)
}

func entryCRC(b []byte, p uint32) uint32 {
	var pb [4]byte
	binary.LittleEndian.PutUint32(pb[:], p)
	return crc32.Update(crc32.Checksum(pb[:], castagnoli), castagnoli, b[:60])
}

// encode writes e, the entry of page e.page, into b[:entrySize].
func (e *entry) encode(b []byte) {
	b = b[:entrySize]
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], entryMagic)
	b[4] = e.kind
	binary.LittleEndian.PutUint64(b[8:], e.gen)
	binary.LittleEndian.PutUint32(b[16:], e.next)
	if e.kind == kindHead {
		b[5] = e.tl
		binary.LittleEndian.PutUint16(b[6:], e.nl)
		binary.LittleEndian.PutUint32(b[20:], e.n)
		binary.LittleEndian.PutUint32(b[24:], e.sum)
		binary.LittleEndian.PutUint64(b[28:], e.id)
		if e.inKey {
			b[36] = flagKeyInEntry
			copy(b[37:60], e.key)
		} else {
			binary.LittleEndian.PutUint32(b[37:], e.keySum)
		}
	} else {
		binary.LittleEndian.PutUint32(b[20:], e.head)
		binary.LittleEndian.PutUint32(b[24:], e.seq)
	}
	binary.LittleEndian.PutUint32(b[60:], entryCRC(b, e.page))
}

// errEmpty marks an entry that holds nothing.
var errEmpty = errors.New("empty entry")

// decodeEntry parses the entry of page p from b. It returns errEmpty for
// an invalidated or never-written entry and a descriptive error for a torn
// or corrupt one.
func decodeEntry(b []byte, p uint32) (entry, error) {
	if len(b) < entrySize {
		return entry{}, fmt.Errorf("entry: %d bytes, want %d", len(b), entrySize)
	}
	magic := binary.LittleEndian.Uint32(b[0:])
	if magic == 0 {
		return entry{}, errEmpty
	}
	if magic != entryMagic {
		return entry{}, fmt.Errorf("entry: bad magic %#08x", magic)
	}
	if want, got := entryCRC(b, p), binary.LittleEndian.Uint32(b[60:]); want != got {
		return entry{}, fmt.Errorf("entry: CRC %08x, computed %08x for page %d", got, want, p)
	}
	e := entry{
		kind: b[4],
		gen:  binary.LittleEndian.Uint64(b[8:]),
		next: binary.LittleEndian.Uint32(b[16:]),
		page: p,
	}
	switch e.kind {
	case kindCont:
		e.head = binary.LittleEndian.Uint32(b[20:])
		e.seq = binary.LittleEndian.Uint32(b[24:])
		return e, nil
	case kindHead:
	default:
		return entry{}, fmt.Errorf("entry: kind %d", e.kind)
	}
	e.head = p
	e.tl = b[5]
	e.nl = binary.LittleEndian.Uint16(b[6:])
	e.n = binary.LittleEndian.Uint32(b[20:])
	e.sum = binary.LittleEndian.Uint32(b[24:])
	e.id = binary.LittleEndian.Uint64(b[28:])
	e.inKey = b[36]&flagKeyInEntry != 0
	kl := int(e.tl) + int(e.nl)
	switch {
	case int(e.tl) > block.MaxTenantLen:
		return entry{}, fmt.Errorf("entry: tenant length %d over %d", e.tl, block.MaxTenantLen)
	case int(e.nl) > block.MaxNameLen:
		return entry{}, fmt.Errorf("entry: name length %d over %d", e.nl, block.MaxNameLen)
	case e.inKey && kl > keyArea:
		return entry{}, fmt.Errorf("entry: key of %d bytes in a key area of %d", kl, keyArea)
	}
	if e.inKey {
		e.key = string(b[37 : 37+kl])
	} else {
		e.keySum = binary.LittleEndian.Uint32(b[37:])
	}
	e.pages = uint32(pagesFor(e.prefixLen() + int(e.n)))
	return e, nil
}

// keyInEntry reports whether k's tenant and name go in the head entry of
// an object of n payload bytes (see the layout above): only when they do
// not fit in front of the payload without an extra page, and fit in the
// key area.
func keyInEntry(k block.Key, n int) bool {
	kl := len(k.Tenant) + len(k.Name)
	return kl > 0 && kl <= keyArea && pagesFor(kl+n) > pagesFor(n)
}

// keyBytes returns k's tenant then name.
func keyBytes(k block.Key) string { return k.Tenant + k.Name }

// pagesFor is the number of pages a record of n bytes occupies (at least
// one: the head entry needs a page even for an empty record).
func pagesFor(n int) int { return max(1, (n+PageSize-1)/PageSize) }

// aligned reports whether b starts at a vfs.DirectIOAlign boundary, as
// O_DIRECT requires of a buffer.
func aligned(b []byte) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%vfs.DirectIOAlign == 0
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

// The geometry file records the format and what the page files were
// formatted with, so that reopening a directory of another format or
// PagesPerFile fails clearly instead of reading every page at the wrong
// offset. The capacity may change between runs: page files beyond it are
// removed and the records that lose a page are dropped at the scan.
const (
	geometryFile  = "ssd.geometry"
	pageFilePref  = "pages-"
	pageFileSuff  = ".dat"
	tableFile     = "pages.tbl"
	geometryMagic = "kvpool-ssd"
	oldSlotPref   = "slots-" // format 1's slot files
)

func pageFileName(i int) string { return fmt.Sprintf("%s%03d%s", pageFilePref, i, pageFileSuff) }

// parsePageFileName returns the index of a page file name.
func parsePageFileName(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, pageFilePref)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, pageFileSuff)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0
}

type geometry struct {
	version      int
	pageSize     int
	pagesPerFile int
}

func (g geometry) encode() []byte {
	return fmt.Appendf(nil, "%s %d\npage_size %d\npages_per_file %d\n", geometryMagic, g.version, g.pageSize, g.pagesPerFile)
}

// parseGeometry parses a geometry file. A file of another format version
// parses as far as its version, so the caller can say which format the
// directory holds.
func parseGeometry(b []byte) (geometry, error) {
	var g geometry
	r := bytes.NewReader(b)
	if _, err := fmt.Fscanf(r, geometryMagic+" %d\n", &g.version); err != nil {
		return g, fmt.Errorf("parse %q: %w", b, err)
	}
	if g.version != formatVersion {
		return g, nil
	}
	if _, err := fmt.Fscanf(r, "page_size %d\npages_per_file %d\n", &g.pageSize, &g.pagesPerFile); err != nil {
		return g, fmt.Errorf("parse %q: %w", b, err)
	}
	return g, nil
}

// checkGeometry reads dir's geometry file, or writes it when the directory
// holds no tier files yet.
func checkGeometry(fs vfs.FS, dir string, want geometry, names []string) error {
	path := filepath.Join(dir, geometryFile)
	size, err := fs.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		for _, n := range names {
			if _, ok := parsePageFileName(n); ok || n == tableFile || strings.HasPrefix(n, oldSlotPref) {
				return fmt.Errorf("%s holds SSD tier files (%s) but no %s: not a kvpool SSD tier, or damaged; use an empty directory", dir, n, geometryFile)
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
	if got.version != want.version {
		what := ""
		if got.version == 1 {
			what = " (fixed-size slots)"
		}
		return fmt.Errorf("%s holds an SSD tier in on-disk format %d%s; this kvpool writes format %d (variable-size objects in %d-byte pages) and cannot read it: use an empty directory (the blocks in it are lost either way)",
			dir, got.version, what, want.version, PageSize)
	}
	if got != want {
		return fmt.Errorf("%s was formatted with page size %d, %d pages per file; the options ask for page size %d, %d pages per file: use the same options or an empty directory",
			dir, got.pageSize, got.pagesPerFile, want.pageSize, want.pagesPerFile)
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
