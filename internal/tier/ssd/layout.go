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
//
// Side table: pages.tbl holds one entry of entrySize bytes per page, entry
// p at offset p*entrySize. Fields, little endian:
//
//	0   magic        u32  entryMagic; 0 means "page holds nothing"
//	4   kind         u8   kindHead or kindCont
//	5   tenant len   u8   (head)
//	6   name len     u16  (head)
//	8   generation   u64  the record's: tier-wide, increasing per put
//	16  head page    u32  the record's first page
//	20  next page    u32  the chain's next page, noPage at the end
//	24  seq          u32  this page's position in the chain (head: 0)
//	28  payload len  u32  (head)
//	32  payload sum  u32  block.Checksum(key, payload) (head)
//	36  key id       u64  (head)
//	44  pages        u32  the chain's length (head)
//	48  page         u32  this entry's own page number (catches misplaced I/O)
//	52  key sum      u32  block.KeySum(key): tenant and name, checked at scan (head)
//	56  reserved     u32  0
//	60  entry CRC    u32  CRC-32C of bytes [0, 60)
//
// A put writes the data pages, then the continuation entries, then the
// head entry: the head entry is the commit record. At Open a head counts
// only when every page of its chain has an entry with the head's
// generation, head page and position, and (verifying) the record's
// tenant, name and payload checksum read back.
const (
	// PageSize is the unit of allocation and of O_DIRECT I/O.
	PageSize = vfs.DirectIOAlign
	// entrySize is one side-table entry: 64 bytes per 4 KiB page, 1.6%.
	entrySize     = 64
	entryMagic    = 0x4b565350 // "PSVK" little endian: kvpool SSD page
	kindHead      = 1
	kindCont      = 2
	noPage        = ^uint32(0)
	formatVersion = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a decoded side-table entry.
type entry struct {
	kind   uint8
	tl     uint8
	nl     uint16
	gen    uint64
	head   uint32
	next   uint32
	seq    uint32
	n      uint32
	sum    uint32
	id     uint64
	pages  uint32
	page   uint32
	keySum uint32
}

// encode writes e into b[:entrySize].
func (e *entry) encode(b []byte) {
	b = b[:entrySize]
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], entryMagic)
	b[4] = e.kind
	b[5] = e.tl
	binary.LittleEndian.PutUint16(b[6:], e.nl)
	binary.LittleEndian.PutUint64(b[8:], e.gen)
	binary.LittleEndian.PutUint32(b[16:], e.head)
	binary.LittleEndian.PutUint32(b[20:], e.next)
	binary.LittleEndian.PutUint32(b[24:], e.seq)
	binary.LittleEndian.PutUint32(b[28:], e.n)
	binary.LittleEndian.PutUint32(b[32:], e.sum)
	binary.LittleEndian.PutUint64(b[36:], e.id)
	binary.LittleEndian.PutUint32(b[44:], e.pages)
	binary.LittleEndian.PutUint32(b[48:], e.page)
	binary.LittleEndian.PutUint32(b[52:], e.keySum)
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
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
	if want, got := crc32.Checksum(b[:60], castagnoli), binary.LittleEndian.Uint32(b[60:]); want != got {
		return entry{}, fmt.Errorf("entry: CRC %08x, computed %08x", got, want)
	}
	e := entry{
		kind:   b[4],
		tl:     b[5],
		nl:     binary.LittleEndian.Uint16(b[6:]),
		gen:    binary.LittleEndian.Uint64(b[8:]),
		head:   binary.LittleEndian.Uint32(b[16:]),
		next:   binary.LittleEndian.Uint32(b[20:]),
		seq:    binary.LittleEndian.Uint32(b[24:]),
		n:      binary.LittleEndian.Uint32(b[28:]),
		sum:    binary.LittleEndian.Uint32(b[32:]),
		id:     binary.LittleEndian.Uint64(b[36:]),
		pages:  binary.LittleEndian.Uint32(b[44:]),
		page:   binary.LittleEndian.Uint32(b[48:]),
		keySum: binary.LittleEndian.Uint32(b[52:]),
	}
	switch {
	case e.page != p:
		return entry{}, fmt.Errorf("entry: names page %d", e.page)
	case e.kind != kindHead && e.kind != kindCont:
		return entry{}, fmt.Errorf("entry: kind %d", e.kind)
	case e.kind == kindHead && (e.head != p || e.seq != 0):
		return entry{}, fmt.Errorf("entry: head names head page %d, position %d", e.head, e.seq)
	case e.kind == kindHead && int(e.tl) > block.MaxTenantLen:
		return entry{}, fmt.Errorf("entry: tenant length %d over %d", e.tl, block.MaxTenantLen)
	case e.kind == kindHead && int(e.nl) > block.MaxNameLen:
		return entry{}, fmt.Errorf("entry: name length %d over %d", e.nl, block.MaxNameLen)
	case e.kind == kindHead && e.pages != uint32(pagesFor(int(e.tl)+int(e.nl)+int(e.n))):
		return entry{}, fmt.Errorf("entry: %d pages for a record of %d bytes", e.pages, int(e.tl)+int(e.nl)+int(e.n))
	}
	return e, nil
}

// pagesFor is the number of pages a record of n bytes occupies (at least
// one: the head entry needs a page even for an empty record).
func pagesFor(n int) int { return max(1, (n+PageSize-1)/PageSize) }

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
		return fmt.Errorf("%s holds an SSD tier in on-disk format %d (format 1: fixed-size slots); this kvpool writes format %d (variable-size objects in %d-byte pages) and cannot read it: use an empty directory (the blocks in it are lost either way)",
			dir, got.version, want.version, PageSize)
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
