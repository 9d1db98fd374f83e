// WHATWG URL and URLSearchParams, matching node 20 (Ada), intrinsics captured
// at load. IDNA approximates UTS #46 ToASCII with lowercase + NFKC (and a few
// UTS #46 mappings), general-category checks, Ada's Bidi/ContextJ rules and
// punycode; "xn--" labels must decode to valid labels. No createObjectURL.
(function(globalObject){
 "use strict";
 const O=Object,R=Reflect,apply=R.apply,def=O.defineProperty,ownKeys=R.ownKeys,gopd=R.getOwnPropertyDescriptor,S=String,TE=TypeError,floor=Math.floor,fcc=S.fromCharCode,fcp=S.fromCodePoint,dURI=decodeURIComponent,RX=RegExp,ITER=Symbol.iterator;
 const call=Function.prototype.call,unc=(f)=>call.bind(f);
 const SP=S.prototype,cca=unc(SP.charCodeAt),slice=unc(SP.slice),idx=unc(SP.indexOf),lidx=unc(SP.lastIndexOf),lower=unc(SP.toLowerCase),norm=unc(SP.normalize),usv=unc(SP.toWellFormed),hex=unc(Number.prototype.toString),rx=unc(RegExp.prototype.exec);
 const from=Array.from,sort=unc(Array.prototype.sort),IterProto=O.getPrototypeOf(O.getPrototypeOf([][ITER]()));
 const str=(v)=>`${v}`,ustr=(v)=>usv(`${v}`);
 const push=(a,v)=>{a[a.length]=v;};
 const prop=(o,k,value)=>def(o,k,{__proto__:null,value,writable:true,enumerable:true,configurable:true});
 const terr=(m,code)=>{const e=new TE(m);prop(e,"code",code);return e;};
 const need=(a,n,m)=>{if(a.length<n)throw terr(`The ${m} must be specified`,"ERR_MISSING_ARGS");};
 const split=(s,ch)=>{const o=[];for(let i=0;;){const j=idx(s,ch,i);if(j<0){push(o,slice(s,i));return o;}push(o,slice(s,i,j));i=j+1;}};
 const ascii=(s)=>{for(let i=0;i<s.length;i++)if(cca(s,i)>127)return false;return true;};

 // encoding
 const mk=(set,m=[-1,0,0,1<<31])=>{for(let i=0;i<set.length;i++){const c=cca(set,i);m[c>>5]|=1<<(c&31);}m.r=null;return m;};
 const HEX="0123456789ABCDEF",C0=mk(""),FRAG=mk(' "<>`'),QRY=mk(' "#<>'),SQRY=mk(" \"#<>'"),PATH=mk(' "#<>?`{}'),USER=mk(' "#<>?`{}/:;=@[\\]^|'),FORM=mk(' "#<>?`{}/:;=@[\\]^|$%&+,!\'()~'),FH=mk(" #/:<>?@[\\]^|",[0x2601,0,0,0]),FD=mk(" #%/:<>?@[\\]^|");
 const has=(s,m)=>{for(let i=0;i<s.length;i++){const c=cca(s,i);if(c<128&&m[c>>5]&1<<(c&31))return true;}return false;};
 const cpAt=(s,i)=>{const c=cca(s,i);if((c&0xF800)!==0xD800)return c;const d=cca(s,i+1);return c<0xDC00&&(d&0xFC00)===0xDC00?0x10000+(c-0xD800)*1024+d-0xDC00:0xFFFD;};
 const cps=(s)=>{const o=[];for(let i=0;i<s.length;i++){const c=cpAt(s,i);push(o,c);if(c>0xFFFF)i++;}return o;};
 const u8=(c)=>c<128?[c]:c<0x800?[0xC0|c>>6,0x80|c&63]:c<0x10000?[0xE0|c>>12,0x80|c>>6&63,0x80|c&63]:[0xF0|c>>18,0x80|c>>12&63,0x80|c>>6&63,0x80|c&63];
 const enc=(s,m,plus)=>{
  if(!m.r){let x="[\\0-\\x1F\\x7F-\\uFFFF";for(let c=32;c<127;c++)if(m[c>>5]&1<<(c&31))x+="\\x"+hex(c,16);m.r=new RX(x+"]");}
  const r=rx(m.r,s);
  if(r===null)return s;
  let o="",k=0;
  for(let i=r.index;i<s.length;i++){
   const c=cca(s,i);
   if(c<128&&!(m[c>>5]&1<<(c&31)))continue;
   o+=slice(s,k,i);
   if(c===32&&plus)o+="+";
   else{const x=cpAt(s,i),b=u8(x);for(let j=0;j<b.length;j++)o+="%"+HEX[b[j]>>4]+HEX[b[j]&15];if(x>0xFFFF)i++;}
   k=i+1;
  }
  return k?o+slice(s,k):s;
 };
 const hexv=(c)=>c>=48&&c<=57?c-48:(c|=32)>=97&&c<=102?c-87:-1;
 const pdec=(s,raw)=>{
  const b=[];
  for(let i=0;i<s.length;i++){
   const c=raw?cca(s,i)&255:cpAt(s,i);
   if(c===37){const h=hexv(cca(s,i+1)),l=hexv(cca(s,i+2));if(h>=0&&l>=0){push(b,h*16+l);i+=2;continue;}}
   const u=raw?[c]:u8(c);
   for(let j=0;j<u.length;j++)push(b,u[j]);
   if(c>0xFFFF)i++;
  }
  let o="",n=0,k=0,cp=0,lo=128,hi=191;
  for(let i=0;i<b.length;i++){
   const x=b[i];
   if(!n){
    if(x<128)o+=fcc(x);
    else if(x>=0xC2&&x<=0xDF){n=1;cp=x&31;}
    else if(x>=0xE0&&x<=0xEF){if(x===0xE0)lo=0xA0;if(x===0xED)hi=0x9F;n=2;cp=x&15;}
    else if(x>=0xF0&&x<=0xF4){if(x===0xF0)lo=0x90;if(x===0xF4)hi=0x8F;n=3;cp=x&7;}
    else o+="\uFFFD";
   }else if(x<lo||x>hi){n=k=0;lo=128;hi=191;o+="\uFFFD";i--;}
   else{lo=128;hi=191;cp=cp<<6|x&63;if(++k===n){o+=fcp(cp);n=k=0;}}
  }
  return n?o+"\uFFFD":o;
 };
 const fdec=(s)=>{
  let o="",k=0,j=-1,esc=false;
  while(!esc&&(j=idx(s,"%",j+1))>=0){
   let n=0,i=j+1;
   for(;n<2&&i<s.length;i++)if(s[i]!=="+"){if(hexv(cca(s,i))<0)break;n++;}
   esc=n===2;
  }
  while((j=idx(s,"+",k))>=0){o+=slice(s,k,j)+" ";k=j+1;}
  if(k)s=o+slice(s,k);
  if(!esc)return s;
  try{return dURI(s);}catch{return pdec(s,true);}
 };

 // hosts
 const adapt=(d,n,first)=>{d=first?floor(d/700):d>>1;d+=floor(d/n);let k=0;for(;d>455;k+=36)d=floor(d/35);return floor(k+36*d/(d+38));};
 const thr=(k,bias)=>k<=bias?1:k>=bias+26?26:k-bias;
 const dig=(d)=>fcc(d+(d<26?97:22));
 const puny=(a)=>{
  let o="",n=128,delta=0,bias=72,h,b;
  for(let i=0;i<a.length;i++)if(a[i]<128)o+=fcc(a[i]);
  h=b=o.length;
  if(b)o+="-";
  while(h<a.length){
   let m=0x110000;
   for(let i=0;i<a.length;i++)if(a[i]>=n&&a[i]<m)m=a[i];
   delta+=(m-n)*(h+1);n=m;
   for(let i=0;i<a.length;i++){
    if(a[i]<n)delta++;
    if(a[i]===n){
     let q=delta;
     for(let k=36;;k+=36){const t=thr(k,bias);if(q<t)break;o+=dig(t+(q-t)%(36-t));q=floor((q-t)/(36-t));}
     o+=dig(q);bias=adapt(delta,h+1,h===b);delta=0;h++;
    }
   }
   delta++;n++;
  }
  return o;
 };
 const unpuny=(s)=>{
  const o=[],b=lidx(s,"-");
  let n=128,i=0,bias=72,r="";
  for(let j=0;j<b;j++)push(o,cca(s,j));
  for(let p=b+1;p<s.length;){
   const old=i;
   for(let k=36,w=1;;k+=36){
    const c=cca(s,p++),d=c<58?c-22:c-97,t=thr(k,bias);
    if(!(c>=48&&c<=57||c>=97&&c<=122))return null;
    i+=d*w;
    if(d<t)break;
    w*=36-t;
    if(i>0x7FFFFFFF||w>0x7FFFFFFF)return null;
   }
   const l=o.length+1;
   bias=adapt(i-old,l,old===0);n+=floor(i/l);i%=l;
   if(n>0x10FFFF)return null;
   for(let j=o.length;j>i;j--)o[j]=o[j-1];
   o[i++]=n;
  }
  for(let j=0;j<o.length;j++)r+=fcp(o[j]);
  return r;
 };
 const rep=(s)=>{
  let o="";
  for(let i=0;i<s.length;i++){
   const c=cca(s,i);
   if(c===0xDB40&&cca(s,i+1)>=0xDD00&&cca(s,i+1)<0xDDF0)i++;
   else if(c===0x3A3)o+="\u03C3";
   else if(c===0x345)o+="\u03B9";
   else if(c===0x1E9E)o+="ss";
   else if(c>=0xAB70&&c<=0xABBF||c>=0x13F8&&c<=0x13FD)o+=fcc(c-(c>0xAB00?0x97D0:8));
   else if(c===0x3002||c===0xFF0E||c===0xFF61)o+=".";
   else if(!(c===0xAD||c===0x34F||c===0x200B||c===0x2060||c===0xFEFF||c>=0x180B&&c<=0x180D||c>=0xFE00&&c<=0xFE0F))o+=s[i];
  }
  return o;
 };
 const map=(s)=>norm(rep(lower(norm(lower(rep(s)),"NFKD"))),"NFC");
 const RX2="\\uFB1D-\\uFDFF\\uFE70-\\uFEFF\\u{10800}-\\u{10FFF}\\u{1E800}-\\u{1EFFF}]",RR="[\\u0590-\\u08FF"+RX2,RA="(?!\\p{M})[\\u0590-\\u06EF\\u06FA-\\u08FF"+RX2;
 const JR="[\\u0620\\u0622-\\u063F\\u0641-\\u064A\\u066E-\\u06D5\\u06EE\\u06EF\\u06FA-\\u06FF\\u0710-\\u077F\\u07CA-\\u07EA\\u0840-\\u0858\\u0860-\\u086A\\u08A0-\\u08C9]";
 const NSM="[\\p{Mn}\\p{Me}]";
 let RE;
 const tst=(i,s)=>{
  if(!RE){RE=["^\\p{M}",RA,`^(?!${RR})\\p{L}`,`^.(?:${NSM}|(?!${RA}).)*.${NSM}*$`,`^(?:${RR}|\\P{L})*$`,`(?:(?!\\p{M})${RR}|[0-9])${NSM}*$`,"[0-9\\u06F0-\\u06F9]","[\\u0600-\\u0605\\u0660-\\u0669\\u066B\\u066C\\u06DD\\u08E2]","(?![\\u200C\\u200D])\\p{Cf}|[\\p{Cc}\\p{Cs}\\p{Co}\\p{Cn}\\p{Z}\\u115F\\u1160\\u17B4\\u17B5\\u3164\\uFFA0\\uFFFC\\uFFFD]","^[^\\u200C\\u200D]*[\\u094D\\u09CD\\u0A4D\\u0ACD\\u0B4D\\u0BCD\\u0C4D\\u0CCD\\u0D3B\\u0D3C\\u0D4D\\u0DCA\\u0E3A\\u0EBA\\u0F84\\u1039\\u103A\\u1714\\u1715\\u1734\\u17D2\\u1A60\\u1B44\\u1BAA\\u1BAB\\u1BF2\\u1BF3\\u2D7F\\uA806\\uA82C\\uA8C4\\uA953\\uA9C0\\uAAF6\\uABED][\\u200C\\u200D]","[\\u200C\\u200D]",`^[^\\u200C\\u200D]*(?![\\u0622-\\u0625\\u0627\\u0629\\u062F-\\u0632\\u0648\\u0671-\\u0673\\u0675-\\u0677\\u0688-\\u0699\\u06C0\\u06C3-\\u06CB\\u06CD\\u06CF\\u06D2\\u06D3\\u06D5\\u06EE\\u06EF])${JR}[^\\u200C\\u200D]*\\u200C.*${JR}`];for(let j=0;j<12;j++)RE[j]=new RX(RE[j],"su");}
  return rx(RE[i],s)!==null;
 };
 const okLabel=(s)=>{
  if(!s||map(s)!==s||tst(0,s)||tst(8,s))return false;
  return tst(9,s)||tst(11,s)||!(tst(10,s)||tst(1,s)&&(tst(2,s)?!tst(3,s):!(tst(4,s)&&tst(5,s))||tst(6,s)&&tst(7,s)));
 };
 const toASCII=(d)=>{
  const a=lower(d);
  if(ascii(d)&&idx(a,"xn--")<0)return a===""?null:a;
  const ls=split(lower(rep(d)),".");
  let r="";
  for(let i=0;i<ls.length;i++){
   let l=ls[i],x=0;
   if(!ascii(l)){
    if(idx(l=map(l),".")>=0)return null;
    if(!ascii(l)){if(slice(l,0,4)==="xn--"||!okLabel(l))return null;l="xn--"+puny(cps(l));x=1;}
   }
   if(!x&&slice(l,0,4)==="xn--"&&!okLabel(unpuny(slice(l,4))))return null;
   r+=(i?".":"")+l;
  }
  return r===""?null:r;
 };
 const v4n=(s)=>{
  let r=10,n=0;
  if(s==="")return NaN;
  if(s.length>1&&s[0]==="0"){if(s[1]==="x"||s[1]==="X"){s=slice(s,2);r=16;}else{s=slice(s,1);r=8;}}
  for(let i=0;i<s.length;i++){const d=hexv(cca(s,i));if(d<0||d>=r)return NaN;n=n*r+d;}
  return n;
 };
 const endsNum=(d)=>{
  const e=d[d.length-1]==="."?d.length-1:d.length,c=cca(d,lidx(d,".",e-1)+1);
  if(!(c>=48&&c<=57))return false;
  const p=split(d,".");
  if(p[p.length-1]===""){if(p.length===1)return false;p.length--;}
  const l=p[p.length-1];
  let dg=l!=="";
  for(let i=0;i<l.length;i++){const c=cca(l,i);if(c<48||c>57)dg=false;}
  return dg||v4n(l)===v4n(l);
 };
 const v4=(d)=>{
  const p=split(d,"."),n=[];
  if(p[p.length-1]===""&&p.length>1)p.length--;
  if(p.length>4)return null;
  for(let i=0;i<p.length;i++)if((n[i]=v4n(p[i]))!==n[i])return null;
  let ip=n[n.length-1];
  if(ip>=256**(5-n.length))return null;
  for(let i=0;i<n.length-1;i++){if(n[i]>255)return null;ip+=n[i]*256**(3-i);}
  return(ip>>>24)+"."+(ip>>>16&255)+"."+(ip>>>8&255)+"."+(ip&255);
 };
 const v6=(s)=>{
  const a=[0,0,0,0,0,0,0,0],at=(i)=>cca(s,i),dg=(c)=>c>=48&&c<=57;
  let pi=0,comp=null,p=0,best=-1,bl=1,o="";
  if(at(0)===58){if(at(1)!==58)return null;p=2;comp=++pi;}
  while(p<s.length){
   if(pi===8)return null;
   if(at(p)===58){if(comp!==null)return null;p++;comp=++pi;continue;}
   let v=0,len=0;
   while(len<4&&hexv(at(p))>=0){v=v*16+hexv(at(p));p++;len++;}
   if(at(p)===46){
    if(len===0||pi>6)return null;
    p-=len;
    let seen=0;
    while(p<s.length){
     let x=null;
     if(seen>0){if(at(p)===46&&seen<4)p++;else return null;}
     if(!dg(at(p)))return null;
     while(dg(at(p))){const d=at(p++)-48;if(x===0)return null;x=x===null?d:x*10+d;if(x>255)return null;}
     a[pi]=a[pi]*256+x;
     if(++seen===2||seen===4)pi++;
    }
    if(seen!==4)return null;
    break;
   }else if(at(p)===58){if(++p>=s.length)return null;}
   else if(p<s.length)return null;
   a[pi++]=v;
  }
  if(comp!==null)for(let sw=pi-comp,i=7;i!==0&&sw>0;i--,sw--){const t=a[i];a[i]=a[comp+sw-1];a[comp+sw-1]=t;}
  else if(pi!==8)return null;
  for(let i=0;i<8;i++){let j=i;while(j<8&&a[j]===0)j++;if(j-i>bl){best=i;bl=j-i;}}
  for(let i=0;i<8;i++){
   if(i===best){o+=i?":":"::";i+=bl-1;}else o+=hex(a[i],16)+(i<7?":":"");
  }
  return"["+o+"]";
 };
 const hostParse=(s,opq)=>{
  if(s[0]==="[")return s[s.length-1]==="]"?v6(slice(s,1,-1)):null;
  if(opq)return has(s,FH)?null:enc(s,C0);
  const d=toASCII(idx(s,"%")<0?usv(s):pdec(s));
  return d===null||has(d,FD)?null:endsNum(d)?v4(d):d;
 };

 // parser
 const DEF={__proto__:null,ftp:21,file:null,http:80,https:443,ws:80,wss:443};
 const special=(s)=>DEF[s]!==undefined,opaque=(u)=>typeof u.a==="string",fixed=(u)=>opaque(u)||u.h===null&&!u.a.length;
 const alpha=(c)=>c!==undefined&&(c>="a"&&c<="z"||c>="A"&&c<="Z");
 const drive=(s)=>s.length===2&&alpha(s[0])&&(s[1]===":"||s[1]==="|");
 const ndrive=(s)=>typeof s==="string"&&alpha(s[0])&&s[1]===":";
 const sdrive=(s,p)=>s.length-p>=2&&drive(s[p]+s[p+1])&&(s.length-p===2||idx("/\\?#",s[p+2])>=0);
 const copy=(a)=>{const o=[];for(let i=0;i<a.length;i++)o[i]=a[i];return o;};
 const shorten=(u)=>{const a=u.a;if(!(u.s==="file"&&a.length===1&&ndrive(a[0]))&&a.length)a.length--;};
 const inherit=(u,b)=>{u.u=b.u;u.w=b.w;u.h=b.h;u.o=b.o;};
 const parse=(s,b,u,so)=>{
  if(!u){
   u={s:"",u:"",w:"",h:null,o:null,a:[],q:null,f:null};
   let i=0,j=s.length;
   while(i<j&&cca(s,i)<=32)i++;
   while(j>i&&cca(s,j-1)<=32)j--;
   s=slice(s,i,j);
  }
  if(idx(s,"\t")>=0||idx(s,"\n")>=0||idx(s,"\r")>=0){let t="";for(let i=0;i<s.length;i++)if(idx("\t\n\r",s[i])<0)t+=s[i];s=t;}
  const len=s.length,h0=u.h;
  let st=so||1,bf="",at=false,br=false,pw=false,sp=special(u.s),c,h;
  const qf=()=>c==="?"?(u.q="",st=20):c==="#"&&(u.f="",st=21);
  for(let p=0;;p++){
   c=s[p];
   const end=c===undefined||c==="/"||c==="?"||c==="#"||sp&&c==="\\";
   switch(st){
    case 1:
     if(alpha(c)){bf+=lower(c);st=2;}else if(!so){st=3;p--;}else return null;
     break;
    case 2:
     if(alpha(c)||c>="0"&&c<="9"||c==="+"||c==="-"||c===".")bf+=lower(c);
     else if(c===":"){
      if(so&&(sp!==special(bf)||bf==="file"&&(u.u||u.w||u.o!==null)||u.s==="file"&&u.h===""))return u;
      u.s=bf;sp=special(bf);
      if(so){if(u.o===(DEF[bf]||0))u.o=null;return u;}
      bf="";
      if(u.s==="file")st=14;
      else if(sp&&b&&b.s===u.s)st=4;
      else if(sp)st=8;
      else if(s[p+1]==="/"){st=5;p++;}else{u.a="";st=19;}
     }else if(!so){bf="";st=3;p=-1;}else return null;
     break;
    case 3:
     if(!b||opaque(b)&&c!=="#")return null;
     if(opaque(b)){u.s=b.s;sp=special(u.s);u.a=b.a;u.q=b.q;u.f="";st=21;}else{st=b.s!=="file"?6:14;p--;}
     break;
    case 4:
     if(c==="/"&&s[p+1]==="/"){st=9;p++;}else{st=6;p--;}
     break;
    case 5:
     if(c==="/")st=10;else{st=18;p--;}
     break;
    case 6:
     u.s=b.s;sp=special(u.s);
     if(c==="/"||sp&&c==="\\")st=7;
     else{
      inherit(u,b);u.a=copy(b.a);u.q=b.q;
      if(!qf()&&c!==undefined){u.q=null;shorten(u);st=18;p--;}
     }
     break;
    case 7:
     if(sp&&(c==="/"||c==="\\"))st=9;else if(c==="/")st=10;else{inherit(u,b);st=18;p--;}
     break;
    case 8:
     st=9;if(c==="/"&&s[p+1]==="/")p++;else p--;
     break;
    case 9:
     if(c!=="/"&&c!=="\\"){st=10;p--;}
     break;
    case 10:
     if(c==="@"){
      if(at)bf="%40"+bf;
      at=true;
      const k=pw?-1:idx(bf,":");
      if(pw)u.w+=enc(bf,USER);else if(k<0)u.u+=enc(bf,USER);else{pw=true;u.u+=enc(slice(bf,0,k),USER);u.w+=enc(slice(bf,k+1),USER);}
      bf="";
     }else if(end){
      if(at&&bf==="")return null;
      p-=bf.length+1;bf="";st=11;
     }else{let e=p+1,x;while(e<len&&(x=s[e])!=="@"&&x!=="/"&&x!=="?"&&x!=="#"&&!(sp&&x==="\\"))e++;bf+=slice(s,p,e);p=e-1;}
     break;
    case 11:case 12:
     if(so&&u.s==="file"){p--;st=16;}
     else if(c===":"&&!br){
      if(bf===""||so===12||(h=hostParse(bf,!sp))===null)return null;
      u.h=h;bf="";st=13;
      if(so&&!h0)return u;
     }else if(end){
      p--;
      if(sp&&bf===""||so&&bf===""&&(u.u||u.w||u.o!==null||h0===null)||(h=hostParse(bf,!sp))===null)return null;
      u.h=h;bf="";st=17;
      if(so)return u;
     }else{if(c==="[")br=true;if(c==="]")br=false;bf+=c;}
     break;
    case 13:
     if(c>="0"&&c<="9")bf+=c;
     else if(end||so){
      if(bf!==""){const n=+bf;if(n>65535)return null;u.o=n===DEF[u.s]?null:n;bf="";}
      if(so)return u;
      st=17;p--;
     }else return null;
     break;
    case 14:
     u.s="file";sp=true;u.h="";
     if(c==="/"||c==="\\")st=15;
     else if(b&&b.s==="file"){
      u.h=b.h;u.a=copy(b.a);u.q=b.q;
      if(!qf()&&c!==undefined){u.q=null;if(sdrive(s,p))u.a=[];else shorten(u);st=18;p--;}
     }else{st=18;p--;}
     break;
    case 15:
     if(c==="/"||c==="\\")st=16;
     else{
      if(b&&b.s==="file"){u.h=b.h;if(!sdrive(s,p)&&ndrive(b.a[0]))push(u.a,b.a[0]);}
      st=18;p--;
     }
     break;
    case 16:
     if(end){
      p--;
      if(!so&&drive(bf))st=18;
      else if(bf===""){u.h="";if(so)return u;st=17;}
      else{
       if((h=hostParse(bf,false))===null)return null;
       u.h=h==="localhost"?"":h;
       if(so)return u;
       bf="";st=17;
      }
     }else bf+=c;
     break;
    case 17:
     if(sp){st=18;if(c!=="/"&&c!=="\\")p--;}
     else if(!so&&c==="?"){u.q="";st=20;}
     else if(!so&&c==="#"){u.f="";st=21;}
     else if(c!==undefined){st=18;if(c!=="/")p--;}
     else if(so&&u.h===null)push(u.a,"");
     break;
    case 18:
     if(c===undefined||c==="/"||sp&&c==="\\"||!so&&(c==="?"||c==="#")){
      const sl=c==="/"||sp&&c==="\\",l=lower(bf),n=u.a.length;
      if(l===".."||l===".%2e"||l==="%2e."||l==="%2e%2e"){shorten(u);if(!sl&&(sp||n))push(u.a,"");}
      else if(l==="."||l==="%2e"){if(!sl)push(u.a,"");}
      else push(u.a,enc(u.s==="file"&&!n&&drive(bf)?bf[0]+":":bf,PATH));
      bf="";
      qf();
     }else{
      let e=p+1,x;
      while(e<len&&(x=s[e])!=="/"&&!(sp&&x==="\\")&&(so||x!=="?"&&x!=="#"))e++;
      bf+=slice(s,p,e);p=e-1;
     }
     break;
    case 19:
     if(!qf()&&c!==undefined){let e=idx(s,"?",p),f=idx(s,"#",p);if(e<0||f>=0&&f<e)e=f;if(e<0)e=len;u.a+=enc(slice(s,p,e),C0);p=e-1;}
     break;
    case 20:
     if(c==="#"&&!so){u.f="";st=21;}
     else if(c!==undefined){let e=so?-1:idx(s,"#",p);if(e<0)e=len;u.q+=enc(slice(s,p,e),sp?SQRY:QRY);p=e-1;}
     break;
    case 21:
     if(c!==undefined){u.f+=enc(slice(s,p),FRAG);p=len-1;}
   }
   if(p>=len)return u;
  }
 };
 const path=(u)=>{if(opaque(u))return u.a;let o="";for(let i=0;i<u.a.length;i++)o+="/"+u.a[i];return o;};
 const href=(u)=>{
  let o=u.s+":";
  if(u.h!==null)o+="//"+(u.u||u.w?u.u+(u.w?":"+u.w:"")+"@":"")+u.h+(u.o!==null?":"+u.o:"");
  else if(!opaque(u)&&u.a.length>1&&u.a[0]==="")o+="/.";
  o+=path(u)+(u.q!==null?"?"+u.q:"");
  return u.f!==null?o+"#"+u.f:o;
 };
 const origin=(u)=>{
  if(u.s==="blob"){const r=parse(path(u),null);return r&&(r.s==="http"||r.s==="https")?origin(r):"null";}
  return special(u.s)&&u.s!=="file"?u.s+"://"+u.h+(u.o!==null?":"+u.o:""):"null";
 };
 const strip=(u)=>{if(opaque(u)&&u.q===null&&u.f===null){let j=u.a.length;while(j&&u.a[j-1]===" ")j--;u.a=slice(u.a,0,j);}};
 const noCreds=(u)=>u.h===null||u.h===""||u.s==="file";
 const qparse=(s)=>{
  const o=[],ps=split(s,"&");
  for(let i=0;i<ps.length;i++){
   const p=ps[i],k=idx(p,"=");
   if(p!=="")push(o,k<0?[fdec(p),""]:[fdec(slice(p,0,k)),fdec(slice(p,k+1))]);
  }
  return o;
 };
 const qser=(l)=>{let o="";for(let i=0;i<l.length;i++)o+=(i?"&":"")+enc(l[i][0],FORM,true)+"="+enc(l[i][1],FORM,true);return o;};
 const fail=(input,base)=>{const e=terr("Invalid URL","ERR_INVALID_URL");prop(e,"input",input);if(base!==undefined)prop(e,"base",base);return e;};
 const finish=(C,tag,g)=>{
  const P=C.prototype,ks=R.ownKeys(P);
  for(let i=0;i<ks.length;i++)if(typeof ks[i]==="string"&&ks[i]!=="constructor")def(P,ks[i],{enumerable:true});
  def(P,Symbol.toStringTag,{value:tag,configurable:true});
  if(g)def(globalObject,tag,{value:C,writable:true,enumerable:false,configurable:true});
 };

 // classes
 let setQ,spSet,spList,spNew;
 class URL{
  #r;#sp=null;
  static{setQ=(x,q)=>{x.#r.q=q===""?null:q;strip(x.#r);};}
  constructor(url,base=undefined){
   need(arguments,1,'"url" argument');
   url=str(url);
   let b=null;
   if(base!==undefined&&(b=parse(str(base),null))===null)throw fail(url,str(base));
   if((this.#r=parse(url,b))===null)throw fail(url,base===undefined?base:str(base));
  }
  static canParse(url,base=undefined){
   need(arguments,1,'"url" argument');
   url=str(url);
   let b=null;
   if(base!==undefined&&(b=parse(str(base),null))===null)return false;
   return parse(url,b)!==null;
  }
  static parse(url,base=undefined){
   need(arguments,1,'"url" argument');
   try{return new URL(url,base);}catch{return null;}
  }
  #sync(){if(this.#sp)spSet(this.#sp,qparse(this.#r.q===null?"":this.#r.q));}
  toString(){return href(this.#r);}
  get href(){return href(this.#r);}
  set href(v){const r=parse(v=str(v),null);if(r===null)throw fail(v);this.#r=r;this.#sync();}
  get origin(){return origin(this.#r);}
  get protocol(){return this.#r.s+":";}
  set protocol(v){parse(str(v)+":",null,this.#r,1);}
  get username(){return this.#r.u;}
  set username(v){v=str(v);if(!noCreds(this.#r))this.#r.u=enc(v,USER);}
  get password(){return this.#r.w;}
  set password(v){v=str(v);if(!noCreds(this.#r))this.#r.w=enc(v,USER);}
  get host(){const r=this.#r;return r.h===null?"":r.o===null?r.h:r.h+":"+r.o;}
  set host(v){v=str(v);if(!fixed(this.#r))parse(v,null,this.#r,11);}
  get hostname(){return this.#r.h===null?"":this.#r.h;}
  set hostname(v){v=str(v);if(!fixed(this.#r))parse(v,null,this.#r,12);}
  get port(){return this.#r.o===null?"":""+this.#r.o;}
  set port(v){v=str(v);const r=this.#r;if(!noCreds(r)){if(v==="")r.o=null;else parse(v,null,r,13);}}
  get pathname(){return path(this.#r);}
  set pathname(v){v=str(v);const r=this.#r;if(!fixed(r)){r.a=[];parse(v,null,r,17);}}
  get search(){const q=this.#r.q;return q?"?"+q:"";}
  set search(v){
   v=str(v);const r=this.#r;
   if(v===""){r.q=null;strip(r);}else{r.q="";parse(v[0]==="?"?slice(v,1):v,null,r,20);}
   this.#sync();
  }
  get searchParams(){return this.#sp??=spNew(this,this.#r.q);}
  get hash(){const f=this.#r.f;return f?"#"+f:"";}
  set hash(v){
   v=str(v);const r=this.#r;
   if(v===""){r.f=null;strip(r);}else{r.f="";parse(v[0]==="#"?slice(v,1):v,null,r,21);}
  }
  toJSON(){return href(this.#r);}
 }

 const badPair=()=>terr("Each query pair must be an iterable [name, value] tuple","ERR_INVALID_TUPLE");
 const isObj=(o)=>o!==null&&(typeof o==="object"||typeof o==="function");
 const NAME='"name" argument',NV='"name" and "value" arguments';
 class URLSearchParams{
  #l=[];#u=null;
  static{
   spSet=(p,l)=>{p.#l=l;};
   spList=(p)=>p.#l;
   spNew=(u,q)=>{const p=new URLSearchParams();p.#l=qparse(q===null?"":q);p.#u=u;return p;};
  }
  constructor(init=undefined){
   const l=this.#l;
   if(init===undefined||init===null)return;
   if(!isObj(init)){init=ustr(init);this.#l=qparse(init[0]==="?"?slice(init,1):init);return;}
   const m=init[ITER];
   if(m!==undefined&&m!==null){
    if(typeof m!=="function")throw terr("Query pairs must be iterable","ERR_ARG_NOT_ITERABLE");
    const ps=[];
    for(const x of init){if(!isObj(x)||typeof x[ITER]!=="function")throw badPair();push(ps,from(x));}
    for(let i=0;i<ps.length;i++){if(ps[i].length!==2)throw badPair();push(l,[ustr(ps[i][0]),ustr(ps[i][1])]);}
   }else{
    const ks=ownKeys(init),seen={__proto__:null};
    for(let i=0;i<ks.length;i++){
     const k=ks[i],d=gopd(init,k);
     if(d!==undefined&&d.enumerable){
      const tk=ustr(k),tv=ustr(init[k]);
      if(seen[tk]!==undefined)l[seen[tk]][1]=tv;else{seen[tk]=l.length;push(l,[tk,tv]);}
     }
    }
   }
  }
  #up(){if(this.#u)setQ(this.#u,qser(this.#l));}
  #rm(a){
   need(a,1,NAME);
   const n=ustr(a[0]),v=a.length>1&&a[1]!==undefined?ustr(a[1]):undefined,l=this.#l,o=[];
   for(let i=0;i<l.length;i++)if(l[i][0]!==n||v!==undefined&&l[i][1]!==v)push(o,l[i]);
   return o;
  }
  get size(){return this.#l.length;}
  append(name,value){need(arguments,2,NV);push(this.#l,[ustr(name),ustr(value)]);this.#up();}
  delete(name,value=undefined){this.#l=this.#rm(arguments);this.#up();}
  get(name){need(arguments,1,NAME);name=ustr(name);const l=this.#l;for(let i=0;i<l.length;i++)if(l[i][0]===name)return l[i][1];return null;}
  getAll(name){need(arguments,1,NAME);name=ustr(name);const l=this.#l,o=[];for(let i=0;i<l.length;i++)if(l[i][0]===name)push(o,l[i][1]);return o;}
  has(name,value=undefined){return this.#rm(arguments).length<this.#l.length;}
  set(name,value){
   need(arguments,2,NV);
   name=ustr(name);value=ustr(value);
   const l=this.#l,o=[];
   let found=false;
   for(let i=0;i<l.length;i++)if(l[i][0]!==name)push(o,l[i]);else if(!found){found=true;push(o,[name,value]);}
   if(!found)push(o,[name,value]);
   this.#l=o;
   this.#up();
  }
  sort(){sort(this.#l,(x,y)=>x[0]<y[0]?-1:x[0]>y[0]?1:0);this.#up();}
  entries(){return new SPI(this,2);}
  forEach(callback,thisArg=undefined){
   if(typeof callback!=="function")throw terr(`The "callback" argument must be of type function. Received ${typeof callback}`,"ERR_INVALID_ARG_TYPE");
   for(let i=0;i<this.#l.length;i++){const e=this.#l[i];apply(callback,thisArg,[e[1],e[0],this]);}
  }
  keys(){return new SPI(this,0);}
  values(){return new SPI(this,1);}
  toString(){return qser(this.#l);}
 }
 class SPI{
  #p;#k;#i=0;
  constructor(p,k){this.#p=p;this.#k=k;}
  next(){
   const l=spList(this.#p),k=this.#k;
   if(this.#i>=l.length)return{value:undefined,done:true};
   const e=l[this.#i++];
   return{value:k===2?[e[0],e[1]]:e[k],done:false};
  }
 }
 O.setPrototypeOf(SPI.prototype,IterProto);
 R.deleteProperty(SPI.prototype,"constructor");
 def(URLSearchParams.prototype,ITER,{value:URLSearchParams.prototype.entries,writable:true,configurable:true});
 finish(SPI,"URLSearchParams Iterator");
 finish(URL,"URL",1);
 finish(URLSearchParams,"URLSearchParams",1);
})
