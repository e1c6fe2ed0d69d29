/* ditto-body: a Valgrind tool that streams what the guest executes to the ditto analyzer.

   The record format is the contract in docs/body-trace.md; read it first.  The tool does no
   analysis: Valgrind runs guest threads one at a time on one core, so every cycle spent here slows
   the target, while the analyzer runs on another core.  Hence the design:

   - Static facts (instruction bytes, which instruction does which memory access, where each side
     exit goes) are written once per translation, as an SB_DEF record, from the instrumentation
     callback.  Translation only happens between superblock executions, so the record lands in the
     stream before the first SB_ENTER that uses it.
   - The per-execution work is inlined into the translated code as plain IR stores into one 64 Ki
     word buffer: no helper call per event.  A superblock loads the buffer cursor once, reserves
     room for everything it can write (one guarded helper call, taken only when the buffer is
     nearly full), stores SB_ENTER, one word per memory-access slot at a fixed offset from the
     cursor, and writes the cursor back before each side exit and at its end.  That is a handful of
     host instructions per superblock plus one store per memory access.
   - The buffer is sent when full, before every guest system call, at fork, at thread exit and at
     process exit, so when all guest threads are blocked in system calls the analyzer has
     everything.

   Built out of tree against Debian's valgrind package by profiler/body/src/tool.rs. */

#include "pub_tool_basics.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_threadstate.h"

/* Core functions the public tool API does not export.  The tool links statically against
   libcoregrind from the same valgrind package, so they resolve at build time.  We need them
   because the tool API has no socket calls, no way to move an fd out of the guest's reach, and its
   "safe" discard refuses to run outside client requests (we discard in the fork child, which is as
   safe as the munmap wrapper that discards there too).  Prototypes as in coregrind/pub_core_*.h
   of 3.19. */
extern SysRes VG_(do_syscall)(UWord sysno, RegWord, RegWord, RegWord, RegWord, RegWord, RegWord,
                              RegWord, RegWord);
extern Int VG_(safe_fd)(Int oldfd);
extern void VG_(discard_translations)(Addr guest_start, ULong range, const HChar* who);

/* ---------------------------------------------------------------------------------------------
   Stream encoding (docs/body-trace.md)
   ------------------------------------------------------------------------------------------ */

#define DB_MAGIC 0x31544259444f4244ULL
#define DB_VERSION 1ULL
#define DB_SKIPPED 0x4000000000000000ULL
#define DB_PAYLOAD_MASK ((1ULL << 56) - 1)
#define DB_ADDR_MASK ((1ULL << 48) - 1)

#define TAG_SB_ENTER 1ULL
#define TAG_EXIT 2ULL
#define TAG_THREAD 3ULL
#define TAG_SB_DEF 4ULL
#define TAG_END 5ULL

#define ITEM_INSTR 1ULL
#define ITEM_MEM 2ULL
#define ITEM_EXIT 3ULL

#define CONTROL(tag, payload) ((1ULL << 63) | ((tag) << 56) | ((ULong)(payload)&DB_PAYLOAD_MASK))

/* Linux errno values we react to (vki-linux.h defines only some of them). */
#define DB_EINTR 4
#define DB_EAGAIN 11
#define DB_EISCONN 106

/* ---------------------------------------------------------------------------------------------
   The buffer.  Guest threads never run concurrently under Valgrind (the big lock), so one buffer
   and plain globals are enough; translated code reads and writes buf_pos directly.
   ------------------------------------------------------------------------------------------ */

#define BUF_WORDS (64 * 1024)
static ULong buf[BUF_WORDS] __attribute__((aligned(64)));
static ULong* buf_pos = buf; /* next free word */

static const HChar* clo_connect = NULL;
static Int sock_fd = -1;
static Bool stream_broken = False; /* the analyzer went away: keep running the guest, drop data */
static Int my_pid = 0;
static Int parent_pid = 0;
static ULong next_sb_id = 1;
static ThreadId last_tid = VG_INVALID_THREADID;

static void send_all(const UChar* p, SizeT n)
{
   while (n > 0 && !stream_broken) {
      /* sendto with MSG_NOSIGNAL: a vanished analyzer must give EPIPE, never a SIGPIPE that
         would kill the guest. */
      SysRes r = VG_(do_syscall)(__NR_sendto, sock_fd, (UWord)p, n, VKI_MSG_NOSIGNAL, 0, 0, 0, 0);
      if (sr_isError(r)) {
         if (sr_Err(r) == DB_EINTR || sr_Err(r) == DB_EAGAIN)
            continue;
         VG_(umsg)("ditto-body: lost the connection to the analyzer (errno %lu); the program goes "
                   "on, its trace is incomplete\n",
                   (unsigned long)sr_Err(r));
         stream_broken = True;
         return;
      }
      p += sr_Res(r);
      n -= sr_Res(r);
   }
}

static void flush(void)
{
   SizeT n = (SizeT)(buf_pos - buf) * sizeof(ULong);
   if (n > 0 && sock_fd >= 0)
      send_all((const UChar*)buf, n);
   buf_pos = buf;
}

static inline void put_word(ULong w)
{
   if (UNLIKELY(buf_pos >= buf + BUF_WORDS))
      flush();
   *buf_pos++ = w;
}

/* Called from translated code (guarded: only when the superblock's words might not fit).
   Returns the new cursor so the superblock need not reload it. */
static VG_REGPARM(0) HWord db_make_room(void)
{
   flush();
   return (HWord)buf_pos;
}

/* ---------------------------------------------------------------------------------------------
   Connection
   ------------------------------------------------------------------------------------------ */

/* "a.b.c.d:port".  The analyzer listens on loopback (docs/body-trace.md), so IPv4 is enough. */
static Bool parse_ipv4_port(const HChar* s, UInt* ip, UInt* port)
{
   UInt a = 0;
   for (Int part = 0; part < 4; part++) {
      UInt v = 0, digits = 0;
      while (*s >= '0' && *s <= '9' && digits < 4) {
         v = v * 10 + (UInt)(*s - '0');
         s++;
         digits++;
      }
      if (digits == 0 || v > 255)
         return False;
      a = (a << 8) | v;
      if (part < 3) {
         if (*s != '.')
            return False;
         s++;
      }
   }
   if (*s != ':')
      return False;
   s++;
   UInt p = 0, digits = 0;
   while (*s >= '0' && *s <= '9' && digits < 6) {
      p = p * 10 + (UInt)(*s - '0');
      s++;
      digits++;
   }
   if (digits == 0 || *s != 0 || p == 0 || p > 65535)
      return False;
   *ip = a;
   *port = p;
   return True;
}

static const HChar* errno_name(UWord e)
{
   switch (e) {
      case 111: return "connection refused";
      case 110: return "timed out";
      case 101: return "network unreachable";
      case 113: return "no route to host";
      case 99: return "address not available";
      case 24: return "too many open files";
      default: return "error";
   }
}

static void connect_or_die(void)
{
   UInt ip = 0, port = 0;
   if (!parse_ipv4_port(clo_connect, &ip, &port)) {
      VG_(fmsg)("ditto-body: --ditto-connect=%s: expected IPV4-ADDRESS:PORT, e.g. "
                "127.0.0.1:7000\n",
                clo_connect);
      VG_(exit)(1);
   }
   SysRes r = VG_(do_syscall)(__NR_socket, VKI_AF_INET, VKI_SOCK_STREAM, 0, 0, 0, 0, 0, 0);
   if (sr_isError(r)) {
      VG_(fmsg)("ditto-body: cannot create a socket to reach the analyzer at %s (errno %lu)\n",
                clo_connect, (unsigned long)sr_Err(r));
      VG_(exit)(1);
   }
   Int fd = (Int)sr_Res(r);
   struct vki_sockaddr_in sa;
   VG_(memset)(&sa, 0, sizeof(sa));
   sa.sin_family = VKI_AF_INET;
   sa.sin_port = (UShort)(((port & 0xff) << 8) | (port >> 8));
   sa.sin_addr.s_addr = ((ip & 0xff) << 24) | ((ip & 0xff00) << 8) | ((ip >> 8) & 0xff00)
                        | (ip >> 24);
   do {
      r = VG_(do_syscall)(__NR_connect, fd, (UWord)&sa, sizeof(sa), 0, 0, 0, 0, 0);
   } while (sr_isError(r) && sr_Err(r) == DB_EINTR);
   if (sr_isError(r) && sr_Err(r) != DB_EISCONN) {
      VG_(fmsg)("ditto-body: cannot connect to the analyzer at %s: %s (errno %lu); is the ditto "
                "profiler listening there?\n",
                clo_connect, errno_name(sr_Err(r)), (unsigned long)sr_Err(r));
      VG_(exit)(1);
   }
   /* Small flushes (before each system call) must reach the analyzer at once: it detects the end
      of a measurement window by the stream going quiet.  Failure only costs latency. */
   Int one = 1;
   (void)VG_(do_syscall)(__NR_setsockopt, fd, 6 /* IPPROTO_TCP */, 1 /* TCP_NODELAY */,
                         (UWord)&one, sizeof(one), 0, 0, 0);
   /* Move the fd above the guest's fd limit and make it close-on-exec: the guest can neither see
      nor close it, and an exec'd program does not inherit it. */
   sock_fd = VG_(safe_fd)(fd);
   stream_broken = False;
}

static void write_header(void)
{
   put_word(DB_MAGIC);
   put_word(DB_VERSION);
   put_word((ULong)my_pid);
   put_word((ULong)parent_pid);
}

/* ---------------------------------------------------------------------------------------------
   Superblock definitions: staged in a growable array, then copied into the buffer (flushing as
   needed), so a definition of any size fits.
   ------------------------------------------------------------------------------------------ */

static ULong* def_words = NULL;
static SizeT def_used = 0;
static SizeT def_cap = 0;

static void def_put(ULong w)
{
   if (def_used == def_cap) {
      def_cap = def_cap ? 2 * def_cap : 1024;
      def_words = VG_(realloc)("ditto.def", def_words, def_cap * sizeof(ULong));
   }
   def_words[def_used++] = w;
}

static void def_commit(void)
{
   /* word 0 is the SB_DEF control word, whose payload counts the words after it */
   def_words[0] = CONTROL(TAG_SB_DEF, def_used - 1);
   SizeT done = 0;
   while (done < def_used) {
      if (buf_pos >= buf + BUF_WORDS)
         flush();
      SizeT room = (SizeT)(buf + BUF_WORDS - buf_pos);
      SizeT n = def_used - done < room ? def_used - done : room;
      VG_(memcpy)(buf_pos, def_words + done, n * sizeof(ULong));
      buf_pos += n;
      done += n;
   }
}

static void def_instr(Addr addr, UInt len)
{
   def_put((ITEM_INSTR << 56) | ((ULong)len << 48) | ((ULong)addr & DB_ADDR_MASK));
   /* The bytes were just decoded by VEX from this address, so they are readable. */
   const UChar* p = (const UChar*)addr;
   for (UInt k = 0; k < len; k += 8) {
      ULong w = 0;
      for (UInt j = 0; j < 8 && k + j < len; j++)
         w |= (ULong)p[k + j] << (8 * j);
      def_put(w);
   }
}

/* ---------------------------------------------------------------------------------------------
   Instrumentation
   ------------------------------------------------------------------------------------------ */

typedef struct {
   IRSB* out;
   IRExpr* base;   /* cursor at superblock entry, where SB_ENTER goes */
   UInt slots;     /* memory-access slots so far; slot i is at word 1 + i */
   UInt exits;     /* side exits so far */
   Bool have_instr; /* an INSTR item has been written: MEM/EXIT items need one to belong to */
   /* The current instruction's last unguarded load, to recognise VEX's locked read-modify-write:
      a plain load, then a CAS at the same address (see Ist_CAS). */
   IRExpr* load_addr;
   UInt load_size;
} Instr;

static IRExpr* assign(IRSB* sb, IRType ty, IRExpr* e)
{
   IRTemp t = newIRTemp(sb->tyenv, ty);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, e));
   return IRExpr_RdTmp(t);
}

static IRExpr* cursor_plus(Instr* in, UInt words)
{
   return assign(in->out, Ity_I64,
                 IRExpr_Binop(Iop_Add64, in->base, IRExpr_Const(IRConst_U64(8ULL * words))));
}

static Bool is_const_true(const IRExpr* e)
{
   return e == NULL
          || (e->tag == Iex_Const && e->Iex.Const.con->tag == Ico_U1
              && e->Iex.Const.con->Ico.U1);
}

/* One memory-access slot: the MEM item in the definition, and at run time one store of the
   address (or SKIPPED when the guard is false) at the slot's fixed offset. */
static void add_slot(Instr* in, IRExpr* addr, UInt size, Bool store, IRExpr* guard)
{
   Bool guarded = !is_const_true(guard);
   def_put((ITEM_MEM << 56) | ((ULong)(store ? 1 : 0) << 48) | ((ULong)(guarded ? 1 : 0) << 47)
           | (ULong)size);
   IRExpr* where = cursor_plus(in, 1 + in->slots);
   IRExpr* value = addr;
   if (typeOfIRExpr(in->out->tyenv, addr) != Ity_I64)
      value = assign(in->out, Ity_I64, IRExpr_Unop(Iop_32Uto64, addr));
   if (guarded)
      value = assign(in->out, Ity_I64,
                     IRExpr_ITE(guard, value, IRExpr_Const(IRConst_U64(DB_SKIPPED))));
   addStmtToIRSB(in->out, IRStmt_Store(Iend_LE, where, value));
   in->slots++;
   in->load_addr = store || guarded ? NULL : addr;
   in->load_size = size;
}

/* Before a side exit: the EXIT word goes where the next slot would, and the cursor is written
   back as if the exit were taken.  If it is not taken, the next slot overwrites the EXIT word and
   the next cursor write-back corrects the cursor; nothing reads either in between (a fault in
   between abandons the superblock, which then reads as having left by this exit). */
static void add_exit(Instr* in, IRStmt* st)
{
   const IRConst* dst = st->Ist.Exit.dst;
   ULong target = dst->tag == Ico_U64 ? dst->Ico.U64 : (ULong)dst->Ico.U32;
   ULong kind = st->Ist.Exit.jk == Ijk_Boring ? 0 : 1;
   def_put((ITEM_EXIT << 56) | (kind << 48) | (target & DB_ADDR_MASK));
   UInt at = 1 + in->slots;
   addStmtToIRSB(in->out, IRStmt_Store(Iend_LE, cursor_plus(in, at),
                                       IRExpr_Const(IRConst_U64(CONTROL(TAG_EXIT, in->exits)))));
   addStmtToIRSB(in->out, IRStmt_Store(Iend_LE, IRExpr_Const(IRConst_U64((HWord)&buf_pos)),
                                       cursor_plus(in, at + 1)));
   in->exits++;
}

static UInt size_of_type(IRType ty)
{
   return ty == Ity_INVALID ? 0 : (UInt)sizeofIRType(ty);
}

static IRSB* db_instrument(VgCallbackClosure* closure, IRSB* sbIn, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   (void)closure;
   (void)layout;
   (void)archinfo_host;
   if (gWordTy != Ity_I64 || hWordTy != Ity_I64)
      VG_(tool_panic)("ditto-body supports 64-bit guests only");

   IRSB* out = deepCopyIRSBExceptStmts(sbIn);
   Int i = 0;
   /* The preamble before the first IMark (self-modifying-code checks) is copied as is: if it
      exits, the superblock never started, and nothing is recorded. */
   while (i < sbIn->stmts_used && sbIn->stmts[i]->tag != Ist_IMark) {
      addStmtToIRSB(out, sbIn->stmts[i]);
      i++;
   }

   ULong id = next_sb_id++;
   def_used = 0;
   def_put(0); /* SB_DEF control word, filled in by def_commit */
   def_put(id);
   def_put((ULong)vge->base[0]);

   /* Reserve room at entry: if the cursor is past `limit`, the words this superblock can write
      might not fit, so flush first.  The limit depends on the number of slots, known only at the
      end: its constant is patched then (IR constants are shared by reference). */
   IRConst* limit = IRConst_U64(0);
   IRExpr* t0 = assign(out, Ity_I64,
                       IRExpr_Load(Iend_LE, Ity_I64, IRExpr_Const(IRConst_U64((HWord)&buf_pos))));
   IRExpr* full = assign(out, Ity_I1, IRExpr_Binop(Iop_CmpLT64U, IRExpr_Const(limit), t0));
   IRTemp fresh = newIRTemp(out->tyenv, Ity_I64);
   IRDirty* di = unsafeIRDirty_1_N(fresh, 0, "ditto_make_room",
                                   VG_(fnptr_to_fnentry)((void*)&db_make_room), mkIRExprVec_0());
   di->guard = full;
   /* State the truth: it rewrites the cursor. */
   di->mFx = Ifx_Modify;
   di->mAddr = IRExpr_Const(IRConst_U64((HWord)&buf_pos));
   di->mSize = sizeof(buf_pos);
   addStmtToIRSB(out, IRStmt_Dirty(di));

   Instr in;
   in.out = out;
   in.base = assign(out, Ity_I64, IRExpr_ITE(full, IRExpr_RdTmp(fresh), t0));
   in.slots = 0;
   in.exits = 0;
   in.have_instr = False;
   in.load_addr = NULL;
   in.load_size = 0;
   addStmtToIRSB(out, IRStmt_Store(Iend_LE, in.base,
                                   IRExpr_Const(IRConst_U64(CONTROL(TAG_SB_ENTER, id)))));

   for (; i < sbIn->stmts_used; i++) {
      IRStmt* st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
         case Ist_IMark: {
            Addr a = st->Ist.IMark.addr;
            UInt len = st->Ist.IMark.len;
            /* len 0: an undecodable instruction (the guest gets SIGILL); it never executes, so it
               is not an instruction of the trace.  len > 15 happens only for Valgrind's client
               request "special instruction", four 4-byte rotates followed by a marker
               instruction: split it into those real instructions. */
            while (len > 15) {
               def_instr(a, 4);
               a += 4;
               len -= 4;
            }
            if (len > 0) {
               def_instr(a, len);
               in.have_instr = True;
            }
            in.load_addr = NULL;
            addStmtToIRSB(out, st);
            break;
         }
         case Ist_WrTmp: {
            IRExpr* e = st->Ist.WrTmp.data;
            if (e->tag == Iex_Load && in.have_instr)
               add_slot(&in, e->Iex.Load.addr, size_of_type(e->Iex.Load.ty), False, NULL);
            addStmtToIRSB(out, st);
            break;
         }
         case Ist_Store: {
            if (in.have_instr)
               add_slot(&in, st->Ist.Store.addr,
                        size_of_type(typeOfIRExpr(sbIn->tyenv, st->Ist.Store.data)), True, NULL);
            addStmtToIRSB(out, st);
            break;
         }
         case Ist_LoadG: {
            IRLoadG* lg = st->Ist.LoadG.details;
            IRType wide = Ity_INVALID, ty = Ity_INVALID;
            typeOfIRLoadGOp(lg->cvt, &wide, &ty);
            if (in.have_instr)
               add_slot(&in, lg->addr, size_of_type(ty), False, lg->guard);
            addStmtToIRSB(out, st);
            break;
         }
         case Ist_StoreG: {
            IRStoreG* sg = st->Ist.StoreG.details;
            if (in.have_instr)
               add_slot(&in, sg->addr, size_of_type(typeOfIRExpr(sbIn->tyenv, sg->data)), True,
                        sg->guard);
            addStmtToIRSB(out, st);
            break;
         }
         case Ist_CAS: {
            IRCAS* cas = st->Ist.CAS.details;
            UInt size = size_of_type(typeOfIRExpr(sbIn->tyenv, cas->dataLo));
            if (cas->dataHi != NULL)
               size *= 2;
            /* One atomic access is a load slot and a store slot.  VEX translates `lock add`,
               `lock xadd` and the like as a plain load followed by a CAS that loads again: that
               first load already is the access's load slot.  `cmpxchg` is a CAS alone. */
            Bool loaded = in.load_addr != NULL && eqIRAtom(in.load_addr, cas->addr)
                          && in.load_size == size;
            if (in.have_instr) {
               if (!loaded)
                  add_slot(&in, cas->addr, size, False, NULL);
               add_slot(&in, cas->addr, size, True, NULL);
            }
            addStmtToIRSB(out, st);
            break;
         }
         case Ist_LLSC: {
            /* Not generated for amd64; handled as a plain load / store for completeness. */
            if (in.have_instr) {
               if (st->Ist.LLSC.storedata == NULL)
                  add_slot(&in, st->Ist.LLSC.addr,
                           size_of_type(typeOfIRTemp(sbIn->tyenv, st->Ist.LLSC.result)), False,
                           NULL);
               else
                  add_slot(&in, st->Ist.LLSC.addr,
                           size_of_type(typeOfIRExpr(sbIn->tyenv, st->Ist.LLSC.storedata)), True,
                           NULL);
            }
            addStmtToIRSB(out, st);
            break;
         }
         case Ist_Dirty: {
            IRDirty* d = st->Ist.Dirty.details;
            if (d->mFx != Ifx_None && d->mAddr != NULL && in.have_instr) {
               UInt size = d->mSize > 0 ? (UInt)d->mSize : 0;
               if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify)
                  add_slot(&in, d->mAddr, size, False, d->guard);
               if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify)
                  add_slot(&in, d->mAddr, size, True, d->guard);
            }
            addStmtToIRSB(out, st);
            break;
         }
         case Ist_Exit: {
            if (in.have_instr)
               add_exit(&in, st);
            addStmtToIRSB(out, st);
            break;
         }
         default:
            /* Put, PutI, AbiHint, MBE, and anything newer: no memory slot, no exit. */
            addStmtToIRSB(out, st);
            break;
      }
   }

   /* Ran to the end: the cursor moves past SB_ENTER and every slot. */
   addStmtToIRSB(out, IRStmt_Store(Iend_LE, IRExpr_Const(IRConst_U64((HWord)&buf_pos)),
                                   cursor_plus(&in, 1 + in.slots)));

   /* Most words one execution can write: SB_ENTER, every slot, and one EXIT word. */
   ULong need = 1ULL + in.slots + 1ULL;
   if (need > BUF_WORDS)
      VG_(tool_panic)("ditto-body: a superblock has more memory accesses than the buffer holds");
   limit->Ico.U64 = (ULong)(HWord)(buf + BUF_WORDS - need);

   def_commit();
   return out;
}

/* ---------------------------------------------------------------------------------------------
   Events
   ------------------------------------------------------------------------------------------ */

static void db_start_client_code(ThreadId tid, ULong blocks_dispatched)
{
   (void)blocks_dispatched;
   /* Only a change of running thread is news; Valgrind restarts the same thread often. */
   if (tid != last_tid) {
      last_tid = tid;
      put_word(CONTROL(TAG_THREAD, ((ULong)tid << 32) | (ULong)(UInt)VG_(gettid)()));
   }
}

static void db_pre_syscall(ThreadId tid, UInt syscallno, UWord* args, UInt nArgs)
{
   (void)tid;
   (void)syscallno;
   (void)args;
   (void)nArgs;
   /* The thread may block here: everything it did must reach the analyzer now. */
   flush();
}

static void db_post_syscall(ThreadId tid, UInt syscallno, UWord* args, UInt nArgs, SysRes res)
{
   (void)tid;
   (void)syscallno;
   (void)args;
   (void)nArgs;
   (void)res;
}

static void db_thread_exit(ThreadId tid)
{
   (void)tid;
   flush();
   /* The tid may be reused by a new OS thread: make the next run announce itself. */
   last_tid = VG_INVALID_THREADID;
}

static void db_fork_pre(ThreadId tid)
{
   (void)tid;
   flush();
}

static void db_fork_child(ThreadId tid)
{
   (void)tid;
   /* The child has its own stream: close the parent's connection (the parent keeps its copy),
      open a new one, and forget every translation so that the superblocks the child runs are
      defined again on its stream, with ids starting at 1. */
   if (sock_fd >= 0)
      VG_(close)(sock_fd);
   sock_fd = -1;
   parent_pid = my_pid;
   my_pid = VG_(getpid)();
   buf_pos = buf;
   next_sb_id = 1;
   last_tid = VG_INVALID_THREADID;
   connect_or_die();
   write_header();
   VG_(discard_translations)((Addr)0, ~0ULL, "ditto-body: fork child");
}

static Bool db_process_cmd_line_option(const HChar* arg)
{
   if VG_STR_CLO (arg, "--ditto-connect", clo_connect) {
   } else
      return False;
   return True;
}

static void db_print_usage(void)
{
   VG_(printf)("    --ditto-connect=IPV4:PORT   where the ditto analyzer listens (required)\n");
}

static void db_print_debug_usage(void)
{
   VG_(printf)("    (none)\n");
}

static void db_post_clo_init(void)
{
   if (clo_connect == NULL || clo_connect[0] == 0) {
      VG_(fmsg)("ditto-body: --ditto-connect=IPV4:PORT is required (where the ditto analyzer "
                "listens)\n");
      VG_(exit)(1);
   }
   /* No chasing across branches: VEX would otherwise fold "A && B" conditional branches into one
      superblock whose second half runs under a guard and whose first branch has no side exit,
      and the stream's rule "every instruction before the taken exit ran" would not hold. */
   VG_(clo_vex_control).guest_chase = False;
   my_pid = VG_(getpid)();
   parent_pid = 0;
   connect_or_die();
   write_header();
}

static void db_fini(Int exitcode)
{
   (void)exitcode;
   put_word(CONTROL(TAG_END, 0));
   flush();
   if (sock_fd >= 0)
      VG_(close)(sock_fd);
   sock_fd = -1;
}

static void db_pre_clo_init(void)
{
   VG_(details_name)("ditto-body");
   VG_(details_version)(NULL);
   VG_(details_description)("streams executed superblocks and data addresses to ditto");
   VG_(details_copyright_author)("ditto authors, Apache-2.0");
   VG_(details_bug_reports_to)("the ditto repository");
   VG_(details_avg_translation_sizeB)(400);

   VG_(basic_tool_funcs)(db_post_clo_init, db_instrument, db_fini);
   VG_(needs_command_line_options)(db_process_cmd_line_option, db_print_usage,
                                   db_print_debug_usage);
   VG_(needs_syscall_wrapper)(db_pre_syscall, db_post_syscall);
   VG_(track_start_client_code)(db_start_client_code);
   VG_(track_pre_thread_ll_exit)(db_thread_exit);
   VG_(atfork)(db_fork_pre, NULL, db_fork_child);
}

VG_DETERMINE_INTERFACE_VERSION(db_pre_clo_init)
