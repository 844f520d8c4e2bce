package fusetest

import "github.com/hanwen/go-fuse/v2/fuse"

// pausing is the loopback's fuse.RawFileSystem with every request held
// while f is paused. It wraps the raw protocol rather than the loopback's
// nodes and files, so that no operation slips past: each method of the
// interface is written out here, without embedding, so that a method go-fuse
// adds breaks the build instead of going through unheld.
//
// FORGET is let through: the kernel does not wait for it, and go-fuse
// starts no new reader of /dev/fuse behind one, so holding it could stop
// the daemon from receiving (and Waiting from counting) the requests that
// a test waits to see held.
type pausing struct {
	fs fuse.RawFileSystem
	f  *FS
}

var _ fuse.RawFileSystem = (*pausing)(nil)

func (p *pausing) String() string        { return "fusetest(" + p.fs.String() + ")" }
func (p *pausing) SetDebug(debug bool)   { p.fs.SetDebug(debug) }
func (p *pausing) Init(s *fuse.Server)   { p.fs.Init(s) }
func (p *pausing) OnUnmount()            { p.fs.OnUnmount() }
func (p *pausing) Forget(node, n uint64) { p.fs.Forget(node, n) }

func (p *pausing) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	p.f.wait("LOOKUP")
	return p.fs.Lookup(c, h, name, out)
}

func (p *pausing) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	p.f.wait("GETATTR")
	return p.fs.GetAttr(c, in, out)
}

func (p *pausing) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	p.f.wait("SETATTR")
	return p.fs.SetAttr(c, in, out)
}

func (p *pausing) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	p.f.wait("MKNOD")
	return p.fs.Mknod(c, in, name, out)
}

func (p *pausing) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	p.f.wait("MKDIR")
	return p.fs.Mkdir(c, in, name, out)
}

func (p *pausing) Unlink(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	p.f.wait("UNLINK")
	return p.fs.Unlink(c, h, name)
}

func (p *pausing) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	p.f.wait("RMDIR")
	return p.fs.Rmdir(c, h, name)
}

func (p *pausing) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	p.f.wait("RENAME")
	return p.fs.Rename(c, in, oldName, newName)
}

func (p *pausing) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	p.f.wait("LINK")
	return p.fs.Link(c, in, name, out)
}

func (p *pausing) Symlink(c <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	p.f.wait("SYMLINK")
	return p.fs.Symlink(c, h, target, name, out)
}

func (p *pausing) Readlink(c <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	p.f.wait("READLINK")
	return p.fs.Readlink(c, h)
}

func (p *pausing) Access(c <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	p.f.wait("ACCESS")
	return p.fs.Access(c, in)
}

func (p *pausing) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	p.f.wait("GETXATTR")
	return p.fs.GetXAttr(c, h, attr, dest)
}

func (p *pausing) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	p.f.wait("LISTXATTR")
	return p.fs.ListXAttr(c, h, dest)
}

func (p *pausing) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	p.f.wait("SETXATTR")
	return p.fs.SetXAttr(c, in, attr, data)
}

func (p *pausing) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	p.f.wait("REMOVEXATTR")
	return p.fs.RemoveXAttr(c, h, attr)
}

func (p *pausing) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	p.f.wait("CREATE")
	return p.fs.Create(c, in, name, out)
}

func (p *pausing) Tmpfile(c <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	p.f.wait("TMPFILE")
	return p.fs.Tmpfile(c, in, out)
}

func (p *pausing) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	p.f.wait("OPEN")
	return p.fs.Open(c, in, out)
}

func (p *pausing) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	p.f.wait("READ")
	return p.fs.Read(c, in, buf)
}

func (p *pausing) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	p.f.wait("LSEEK")
	return p.fs.Lseek(c, in, out)
}

func (p *pausing) GetLk(c <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	p.f.wait("GETLK")
	return p.fs.GetLk(c, in, out)
}

func (p *pausing) SetLk(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	p.f.wait("SETLK")
	return p.fs.SetLk(c, in)
}

func (p *pausing) SetLkw(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	p.f.wait("SETLKW")
	return p.fs.SetLkw(c, in)
}

func (p *pausing) Release(c <-chan struct{}, in *fuse.ReleaseIn) {
	p.f.wait("RELEASE")
	p.fs.Release(c, in)
}

func (p *pausing) Write(c <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	p.f.wait("WRITE")
	return p.fs.Write(c, in, data)
}

func (p *pausing) Writev(c <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	p.f.wait("WRITE")
	return p.fs.Writev(c, in, data)
}

func (p *pausing) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	p.f.wait("COPY_FILE_RANGE")
	return p.fs.CopyFileRange(c, in)
}

func (p *pausing) Ioctl(c <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	p.f.wait("IOCTL")
	return p.fs.Ioctl(c, in, inbuf, out, outbuf)
}

func (p *pausing) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	p.f.wait("FLUSH")
	return p.fs.Flush(c, in)
}

func (p *pausing) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	p.f.wait("FSYNC")
	return p.fs.Fsync(c, in)
}

func (p *pausing) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	p.f.wait("FALLOCATE")
	return p.fs.Fallocate(c, in)
}

func (p *pausing) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	p.f.wait("OPENDIR")
	return p.fs.OpenDir(c, in, out)
}

func (p *pausing) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	p.f.wait("READDIR")
	return p.fs.ReadDir(c, in, out)
}

func (p *pausing) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	p.f.wait("READDIRPLUS")
	return p.fs.ReadDirPlus(c, in, out)
}

func (p *pausing) ReleaseDir(in *fuse.ReleaseIn) {
	p.f.wait("RELEASEDIR")
	p.fs.ReleaseDir(in)
}

func (p *pausing) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	p.f.wait("FSYNCDIR")
	return p.fs.FsyncDir(c, in)
}

func (p *pausing) StatFs(c <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	p.f.wait("STATFS")
	return p.fs.StatFs(c, h, out)
}

func (p *pausing) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	p.f.wait("STATX")
	return p.fs.Statx(c, in, out)
}
